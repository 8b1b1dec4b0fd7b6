//! Hostile input at the HTTP edge: deep nesting, huge arrays, invalid UTF-8 in headers and
//! bodies, and a wrong type in every field the decoder reads. Each must be a prompt `400` with a
//! JSON `{code, message}` that names the problem (never a crash, a hang or a `5xx`), and nothing
//! may be committed. `properties.rs` checks that random bytes never panic the decoder; these
//! tests pin the answers.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::scenario::{changed, config_autoscaler, service, written_by};
use crate::support::*;

/// Sends a request; every answer must come within a few seconds.
async fn send(app: &TestApp, request: Request<Body>) -> (StatusCode, Vec<u8>) {
    let started = Instant::now();
    let response =
        tokio::time::timeout(Duration::from_secs(20), app.router.clone().oneshot(request))
            .await
            .expect("answered without hanging")
            .expect("router answers");
    let status = response.status();
    let body = body_bytes(response).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "answered in {:?}",
        started.elapsed()
    );
    (status, body)
}

/// Asserts a `400` with a JSON error body whose code is one of `codes` and whose message
/// contains `needle`; returns the message.
fn assert_400(status: StatusCode, body: &[u8], codes: &[&str], needle: &str, what: &str) -> String {
    let text = String::from_utf8_lossy(body).to_string();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{what}: {text}");
    assert!(body.len() < 768, "{what}: the error fits a dead letter");
    let value: Value = serde_json::from_slice(body).unwrap_or_else(|_| panic!("{what}: {text}"));
    let code = value["code"].as_str().unwrap_or_default();
    assert!(codes.contains(&code), "{what}: code {code}: {text}");
    let message = value["message"].as_str().unwrap_or_default().to_string();
    assert!(
        message.contains(needle),
        "{what}: {message:?} names {needle:?}"
    );
    message
}

fn nested_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

fn raw(content_type: &str, body: impl Into<Body>) -> Request<Body> {
    Request::post("/")
        .header("content-type", content_type)
        .body(body.into())
        .unwrap()
}

fn binary_headers() -> axum::http::request::Builder {
    Request::post("/")
        .header("ce-specversion", "1.0")
        .header("ce-id", "bad-1")
        .header("ce-source", "https://10.96.0.1:443")
        .header("ce-type", "dev.knative.apiserver.resource.update")
        .header("content-type", "application/json")
}

#[tokio::test]
async fn deeply_nested_json_is_400_in_every_mode() {
    let app = app();
    let deep = nested_arrays(100_000);
    let deep_object = format!("{}1{}", r#"{"a":"#.repeat(100_000), "}".repeat(100_000));
    for (what, payload) in [("arrays", &deep), ("objects", &deep_object)] {
        // Structured: the event itself, and the event's data.
        let (status, body) = send(&app, raw("application/cloudevents+json", payload.clone())).await;
        assert_400(
            status,
            &body,
            &["invalid_json"],
            "recursion limit",
            &format!("structured {what}"),
        );
        let event = format!(
            r#"{{"specversion":"1.0","id":"n","source":"/s","type":"dev.knative.apiserver.resource.add","data":{payload}}}"#
        );
        let (status, body) = send(&app, raw("application/cloudevents+json", event.clone())).await;
        assert_400(
            status,
            &body,
            &["invalid_json"],
            "recursion limit",
            &format!("structured data {what}"),
        );
        // Batch.
        let (status, body) = send(
            &app,
            raw("application/cloudevents-batch+json", format!("[{event}]")),
        )
        .await;
        assert_400(
            status,
            &body,
            &["invalid_json"],
            "recursion limit",
            &format!("batch {what}"),
        );
        // Binary: the body is the object.
        let request = binary_headers().body(Body::from(payload.clone())).unwrap();
        let (status, body) = send(&app, request).await;
        assert_400(
            status,
            &body,
            &["invalid_json"],
            "recursion limit",
            &format!("binary {what}"),
        );
    }
    // Nesting inside an otherwise valid object, just past the parser's limit.
    let mut object = service();
    object["spec"]["template"]["metadata"] = json!({"x": "PLACEHOLDER"});
    let text = serde_json::to_string(&object)
        .unwrap()
        .replace("\"PLACEHOLDER\"", &nested_arrays(200));
    let request = binary_headers().body(Body::from(text)).unwrap();
    let (status, body) = send(&app, request).await;
    assert_400(
        status,
        &body,
        &["invalid_json"],
        "recursion limit",
        "binary nested spec",
    );
    assert_eq!(app.store.event_count(), 0, "nothing is committed");
    // The service still works.
    let (status, _) = send(
        &app,
        structured_request(&structured_event("after", "add", &service())),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
}

#[tokio::test]
async fn huge_arrays_are_400_where_an_object_is_expected() {
    let app = app();
    let huge = format!("[{}0]", "0,".repeat(500_000));
    let (status, body) = send(&app, raw("application/cloudevents+json", huge.clone())).await;
    assert_400(
        status,
        &body,
        &["invalid_json"],
        "",
        "structured huge array",
    );
    // A batch of 500k non-events.
    let (status, body) = send(
        &app,
        raw("application/cloudevents-batch+json", huge.clone()),
    )
    .await;
    assert_400(
        status,
        &body,
        &["invalid_json"],
        "batch",
        "batch huge array",
    );
    // As the object.
    let request = binary_headers().body(Body::from(huge.clone())).unwrap();
    let (status, body) = send(&app, request).await;
    assert_400(
        status,
        &body,
        &["invalid_object"],
        "data must be a JSON object",
        "binary huge array",
    );
    // In typed fields.
    for field in ["ownerReferences", "managedFields", "labels", "annotations"] {
        let mut object = service();
        object["metadata"][field] = json!("PLACEHOLDER");
        let text = serde_json::to_string(&object)
            .unwrap()
            .replace("\"PLACEHOLDER\"", &huge);
        let request = binary_headers().body(Body::from(text)).unwrap();
        let (status, body) = send(&app, request).await;
        assert_400(
            status,
            &body,
            &["invalid_object"],
            &format!("data.metadata.{field}"),
            field,
        );
    }
    assert_eq!(app.store.event_count(), 0, "nothing is committed");
}

#[tokio::test]
async fn huge_arrays_inside_a_valid_object_are_handled_promptly() {
    // A valid object may carry a big list (args, env, traffic): it is accepted, and an edit of it
    // is diffed within bounds and without a hang. (The lists are as big as the object bounds of
    // `decode::shape` let them be: a 1 MiB spec, 1,000 traffic targets.)
    let app = app();
    let mut object = service();
    object["spec"]["template"]["spec"]["containers"][0]["args"] = json!((0..60_000)
        .map(|index| format!("--a{index}"))
        .collect::<Vec<_>>());
    object["spec"]["traffic"] = json!((0..1_000)
        .map(|index| json!({"revisionName": format!("r-{index}"), "percent": 0}))
        .collect::<Vec<_>>());
    let (status, body) = send(
        &app,
        binary_request(&structured_event("big-1", "add", &object)),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    let edited = changed(&object, |s| {
        s["spec"]["template"]["spec"]["containers"][0]["args"] = json!((0..60_000)
            .map(|index| format!("--b{index}"))
            .collect::<Vec<_>>());
        s["spec"]["traffic"][0]["percent"] = json!(100);
        written_by(
            s,
            "kubectl-edit",
            "Update",
            json!({"f:spec": {"f:traffic": {}}}),
            "2026-11-29T10:00:00Z",
        );
    });
    let (status, body) = send(
        &app,
        binary_request(&structured_event("big-2", "update", &edited)),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "{}",
        String::from_utf8_lossy(&body)
    );
}

#[tokio::test]
async fn invalid_utf8_in_header_values_is_400() {
    let app = app();
    for header in [
        "ce-id",
        "ce-source",
        "ce-type",
        "ce-specversion",
        "ce-time",
        "ce-subject",
    ] {
        let mut builder = Request::post("/").header("content-type", "application/json");
        for (name, value) in [
            ("ce-specversion", "1.0"),
            ("ce-id", "utf8-1"),
            ("ce-source", "https://10.96.0.1:443"),
            ("ce-type", "dev.knative.apiserver.resource.add"),
        ] {
            if name != header {
                builder = builder.header(name, value);
            }
        }
        let value = axum::http::HeaderValue::from_bytes(b"caf\xe9 \xff\xfe").unwrap();
        let request = builder
            .header(header, value)
            .body(Body::from(serde_json::to_vec(&service()).unwrap()))
            .unwrap();
        let (status, body) = send(&app, request).await;
        assert_400(status, &body, &["invalid_event"], "", header);
    }
    // A percent-encoded invalid UTF-8 sequence in an attribute is invalid too.
    let request = binary_headers()
        .header("ce-cluster", "prod%FF")
        .body(Body::from(serde_json::to_vec(&service()).unwrap()))
        .unwrap();
    let (status, body) = send(&app, request).await;
    assert_400(
        status,
        &body,
        &["invalid_event"],
        "cluster",
        "percent-encoded ce-cluster",
    );
    assert_eq!(app.store.event_count(), 0, "nothing is committed");
}

#[tokio::test]
async fn invalid_utf8_in_bodies_is_400_in_every_mode() {
    let app = app();
    let mut object = serde_json::to_vec(&service()).unwrap();
    // Corrupt a string value in place: `"knative-webapp"` → `"kn\xfftive-webapp"`.
    let at = object
        .windows(16)
        .position(|window| window == b"\"knative-webapp\"")
        .expect("name in body");
    object[at + 3] = 0xff;
    let request = binary_headers().body(Body::from(object.clone())).unwrap();
    let (status, body) = send(&app, request).await;
    assert_400(status, &body, &["invalid_json"], "", "binary");
    let mut event = br#"{"specversion":"1.0","id":"u","source":"/s","type":"dev.knative.apiserver.resource.add","data":"#.to_vec();
    event.extend_from_slice(&object);
    event.push(b'}');
    let (status, body) = send(&app, raw("application/cloudevents+json", event.clone())).await;
    assert_400(status, &body, &["invalid_json"], "", "structured");
    let mut batch = b"[".to_vec();
    batch.extend_from_slice(&event);
    batch.push(b']');
    let (status, body) = send(&app, raw("application/cloudevents-batch+json", batch)).await;
    assert_400(status, &body, &["invalid_json"], "", "batch");
    // Invalid UTF-8 in the event's own attributes.
    let (status, body) = send(
        &app,
        raw(
            "application/cloudevents+json",
            &b"{\"specversion\":\"1.0\",\"id\":\"\xff\",\"source\":\"/s\",\"type\":\"t\"}"[..],
        ),
    )
    .await;
    assert_400(status, &body, &["invalid_json"], "", "structured id");
    assert_eq!(app.store.event_count(), 0, "nothing is committed");
}

/// Every attribute of a structured event with a value of the wrong type.
#[tokio::test]
async fn wrong_types_in_every_cloudevent_attribute_are_400() {
    let app = app();
    let wrong = [json!(7), json!(true), json!([1]), json!({"a": 1})];
    for attribute in [
        "specversion",
        "id",
        "source",
        "type",
        "time",
        "subject",
        "datacontenttype",
        "dataschema",
    ] {
        for value in &wrong {
            let mut event = structured_event("types", "add", &service());
            event[attribute] = value.clone();
            let (status, body) = send(&app, structured_request(&event)).await;
            assert_400(
                status,
                &body,
                &["invalid_json", "invalid_event"],
                "",
                &format!("{attribute} = {value}"),
            );
            let (status, body) = send(&app, batch_request(&[event])).await;
            assert_400(
                status,
                &body,
                &["invalid_json", "invalid_event"],
                "batch",
                &format!("batch {attribute} = {value}"),
            );
        }
    }
    assert_eq!(app.store.event_count(), 0, "nothing is committed");
}

/// Every field of the object the decoder reads, with a value of the wrong type: the message
/// names the field's path.
#[tokio::test]
async fn wrong_types_in_every_object_field_are_400_naming_the_field() {
    let app = app();
    let mut owned = service();
    owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "serving.knative.dev/v1",
        "kind": "Service", "name": "knative-webapp", "uid": "u-1", "controller": true}]);
    written_by(
        &mut owned,
        "kubectl-edit",
        "Update",
        json!({"f:spec": {}}),
        "2026-11-29T10:00:00Z",
    );
    let cases: Vec<(&str, Vec<Value>, &str)> = vec![
        (
            "/apiVersion",
            vec![json!(1), json!([]), json!({}), json!(true)],
            "data.apiVersion",
        ),
        ("/kind", vec![json!(1), json!([]), json!({})], "data.kind"),
        (
            "/metadata",
            vec![json!(1), json!("m"), json!([]), json!(null)],
            "data.metadata",
        ),
        (
            "/metadata/name",
            vec![json!(1), json!([]), json!({})],
            "data.metadata.name",
        ),
        (
            "/metadata/namespace",
            vec![json!(1), json!([]), json!({})],
            "data.metadata.namespace",
        ),
        (
            "/metadata/uid",
            vec![json!(1), json!([]), json!(false)],
            "data.metadata.uid",
        ),
        (
            "/metadata/resourceVersion",
            vec![json!(1), json!([]), json!({})],
            "data.metadata.resourceVersion",
        ),
        (
            "/metadata/generation",
            vec![
                json!("2"),
                json!(1.5),
                json!([]),
                json!(18446744073709551615u64),
            ],
            "data.metadata.generation",
        ),
        (
            "/metadata/creationTimestamp",
            vec![json!(1), json!({})],
            "data.metadata.creationTimestamp",
        ),
        (
            "/metadata/deletionTimestamp",
            vec![json!(1), json!([])],
            "data.metadata.deletionTimestamp",
        ),
        (
            "/metadata/labels",
            vec![json!(1), json!("x"), json!([])],
            "data.metadata.labels",
        ),
        (
            "/metadata/labels/app",
            vec![json!(1), json!(["x"]), json!({})],
            "data.metadata.labels.app",
        ),
        (
            "/metadata/annotations",
            vec![json!(1), json!([])],
            "data.metadata.annotations",
        ),
        (
            "/metadata/ownerReferences",
            vec![json!(1), json!("x"), json!({})],
            "data.metadata.ownerReferences",
        ),
        (
            "/metadata/ownerReferences/0",
            vec![json!(1), json!("x")],
            "data.metadata.ownerReferences",
        ),
        (
            "/metadata/ownerReferences/0/uid",
            vec![json!(1), json!(null)],
            "data.metadata.ownerReferences",
        ),
        (
            "/metadata/ownerReferences/0/controller",
            vec![json!("yes")],
            "data.metadata.ownerReferences",
        ),
        (
            "/metadata/managedFields",
            vec![json!(1), json!("x"), json!({})],
            "data.metadata.managedFields",
        ),
        (
            "/metadata/managedFields/0",
            vec![json!(1), json!("x"), json!([])],
            "data.metadata.managedFields[0]",
        ),
        (
            "/metadata/managedFields/0/manager",
            vec![json!(1), json!([])],
            "data.metadata.managedFields[0].manager",
        ),
        (
            "/metadata/managedFields/0/operation",
            vec![json!(1)],
            "data.metadata.managedFields[0].operation",
        ),
        (
            "/metadata/managedFields/0/time",
            vec![json!(1), json!({})],
            "data.metadata.managedFields[0].time",
        ),
        (
            "/metadata/managedFields/0/fieldsV1",
            vec![json!(1), json!("f:spec"), json!([])],
            "data.metadata.managedFields[0].fieldsV1",
        ),
    ];
    // The label the labels/app case needs, and a (null) deletionTimestamp to overwrite.
    owned["metadata"]["labels"] = json!({"app": "knative-webapp"});
    owned["metadata"]["deletionTimestamp"] = Value::Null;
    for (pointer, values, path) in cases {
        for value in values {
            let mut object = owned.clone();
            *object
                .pointer_mut(pointer)
                .unwrap_or_else(|| panic!("{pointer} exists")) = value.clone();
            for mode in [ContentMode::Binary, ContentMode::Structured] {
                let event = structured_event("wrong-type", "update", &object);
                let (status, body) = send(&app, request(mode, &event)).await;
                assert_400(
                    status,
                    &body,
                    &["invalid_object"],
                    path,
                    &format!("{mode:?} {pointer} = {value}"),
                );
            }
        }
    }
    // ConfigMap data values are strings.
    let mut config_map = config_autoscaler();
    config_map["data"] = json!({"max-scale": 3});
    let (status, body) = send(
        &app,
        structured_request(&structured_event("cm", "add", &config_map)),
    )
    .await;
    assert_400(
        status,
        &body,
        &["invalid_object"],
        "data.data.max-scale",
        "ConfigMap data value",
    );
    config_map["data"] = json!(["max-scale"]);
    let (status, body) = send(
        &app,
        structured_request(&structured_event("cm", "add", &config_map)),
    )
    .await;
    assert_400(
        status,
        &body,
        &["invalid_object"],
        "data.data",
        "ConfigMap data",
    );
    assert_eq!(app.store.event_count(), 0, "nothing is committed");
}

/// Fields whose shape Kubernetes does not fix for every kind (`spec`, `status`) may hold
/// anything: such an event is accepted or refused, never a crash or a `5xx`.
#[tokio::test]
async fn any_shape_of_spec_and_status_is_never_a_server_error() {
    let app = app();
    let shapes = [
        json!(1),
        json!("x"),
        json!([1, {"a": []}]),
        json!({"traffic": "all"}),
        json!({"traffic": [1, "x", null, {"percent": "100"}]}),
        json!({"conditions": {"Ready": true}}),
        json!({"conditions": [1, {"type": 1, "status": []}]}),
        json!({"template": {"spec": {"containers": "c"}}}),
        json!({"observedGeneration": "1"}),
        json!({"replicas": -1, "actualReplicas": 1e300}),
    ];
    let mut version = 1000;
    for (index, shape) in shapes.iter().enumerate() {
        for field in ["spec", "status"] {
            version += 1;
            let mut object = service();
            object[field] = shape.clone();
            object["metadata"]["resourceVersion"] = json!(version.to_string());
            let event = structured_event(&format!("shape-{field}-{index}"), "update", &object);
            let (status, body) = send(&app, structured_request(&event)).await;
            assert!(
                status == StatusCode::ACCEPTED || status == StatusCode::BAD_REQUEST,
                "{field} = {shape}: {status} {}",
                String::from_utf8_lossy(&body)
            );
        }
    }
}

/// Sends `object` as a binary-mode `add` and returns the `400` message, naming `needle`.
async fn refused(app: &TestApp, id: &str, object: &Value, needle: &str, what: &str) -> String {
    let (status, body) = send(app, binary_request(&structured_event(id, "add", object))).await;
    assert_400(status, &body, &["invalid_object"], needle, what)
}

#[tokio::test]
async fn wrong_types_in_what_the_classes_read_are_a_400_with_the_key_path() {
    // A real API server never sends these; a forged or broken sender gets a precise 400 instead
    // of the engine guessing (a string spec, an object of conditions, a percent as a string or
    // beyond 100, a negative generation).
    let app = app();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "string spec",
            json!({"spec": "nope"}),
            "data.spec: expected an object, got a string",
        ),
        (
            "object conditions",
            json!({"status": {"conditions": {"type": "Ready"}}}),
            "data.status.conditions: expected an array, got an object",
        ),
        (
            "string percent",
            json!({"spec": {"traffic": [{"latestRevision": true, "percent": "100"}]}}),
            "data.spec.traffic[0].percent: expected an integer from 0 to 100",
        ),
        (
            "huge percent",
            json!({"status": {"traffic": [{"revisionName": "a", "percent": 1e20}]}}),
            "data.status.traffic[0].percent: expected an integer from 0 to 100",
        ),
        (
            "negative generation",
            json!({"metadata": {"generation": -1}}),
            "data.metadata.generation: must not be negative",
        ),
        (
            "numeric condition status",
            json!({"status": {"conditions": [{"type": "Ready", "status": 1}]}}),
            "data.status.conditions[0].status: expected a string, got a number",
        ),
        (
            "negative observedGeneration",
            json!({"status": {"observedGeneration": -3}}),
            "data.status.observedGeneration: expected a non-negative integer",
        ),
        (
            "image as a number",
            json!({"spec": {"template": {"spec": {"containers": [{"image": 7}]}}}}),
            "data.spec.template.spec.containers[0].image: expected a string",
        ),
    ];
    for (index, (what, patch, needle)) in cases.into_iter().enumerate() {
        let mut object = service();
        merge(&mut object, &patch);
        refused(&app, &format!("type-{index}"), &object, needle, what).await;
    }
    assert_eq!(app.store.event_count(), 0, "nothing is committed");
}

#[tokio::test]
async fn what_one_object_may_cost_is_bounded_and_the_400_names_the_limit() {
    let app = app();
    let mut object = service();
    object["metadata"]["managedFields"] = json!((0..129)
        .map(|index| json!({"manager": format!("m{index}"), "operation": "Update"}))
        .collect::<Vec<_>>());
    refused(
        &app,
        "cost-1",
        &object,
        "data.metadata.managedFields: 129 entries, more than the limit of 128",
        "managedFields",
    )
    .await;
    let mut object = service();
    object["metadata"]["labels"] = json!((0..257)
        .map(|index| (format!("l{index}"), json!("v")))
        .collect::<serde_json::Map<_, _>>());
    refused(
        &app,
        "cost-2",
        &object,
        "data.metadata.labels: 257 labels, more than the limit of 256",
        "labels",
    )
    .await;
    let mut object = service();
    object["metadata"]["annotations"] = json!({"big": "x".repeat(300 * 1024)});
    refused(
        &app,
        "cost-3",
        &object,
        "more than the limit of 262144",
        "annotations",
    )
    .await;
    let mut object = service();
    object["spec"]["template"]["spec"]["containers"][0]["args"] = json!((0..120_000)
        .map(|index| format!("--a{index}"))
        .collect::<Vec<_>>());
    refused(&app, "cost-4", &object, "data.spec: ", "spec size").await;
    let mut object = config_autoscaler();
    object["data"] = json!({"big": "x".repeat(1100 * 1024)});
    refused(&app, "cost-5", &object, "data.data: ", "ConfigMap data").await;
    assert_eq!(app.store.event_count(), 0, "nothing is committed");
}

/// A bad `TOKIO_WORKER_THREADS` stops `serve` before it starts, with exit 2 and a message that
/// names the variable (tokio's own reading of it would panic), and nothing is created.
#[test]
fn a_bad_worker_thread_count_is_a_clear_error_not_a_panic() {
    for bad in ["0", "many"] {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_drift-sentinel"))
            .arg("serve")
            .current_dir(dir.path())
            .env_remove("DRIFT_SENTINEL_CONFIG")
            .env("TOKIO_WORKER_THREADS", bad)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > Duration::from_secs(20) {
                child.kill().unwrap();
                panic!("TOKIO_WORKER_THREADS={bad}: serve started");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.code(), Some(2), "{bad}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "TOKIO_WORKER_THREADS=\"{bad}\" is not a whole number"
            )),
            "{bad}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{bad}: {stderr}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{bad}: nothing is created"
        );
    }
}
