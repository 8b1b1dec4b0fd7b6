//! The ingest contract, response code by response code, in every content mode.

use crate::support::StoredStates;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::support::*;

async fn send(
    app: &TestApp,
    request: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let response = app
        .router
        .clone()
        .oneshot(request)
        .await
        .expect("router answers");
    let status = response.status();
    let headers = response.headers().clone();
    (status, headers, body_bytes(response).await)
}

fn assert_accepted(status: StatusCode, headers: &axum::http::HeaderMap, body: &[u8], what: &str) {
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "{what}: {}",
        String::from_utf8_lossy(body)
    );
    assert!(body.is_empty(), "{what}: a 2xx must have an empty body");
    assert!(
        headers.keys().all(|name| !name.as_str().starts_with("ce-")),
        "{what}: a 2xx must not carry ce-* headers (the Broker would treat it as a reply)"
    );
}

fn error_code(body: &[u8]) -> String {
    let value: Value = serde_json::from_slice(body).expect("error body is JSON");
    assert!(value["message"].as_str().is_some_and(|m| !m.is_empty()));
    value["code"].as_str().expect("code").to_string()
}

#[tokio::test]
async fn valid_event_is_accepted_with_empty_body_in_every_mode() {
    for mode in MODES {
        let app = app();
        let event = structured_event(&format!("accept-{mode:?}"), "add", &revision());
        let (status, headers, body) = send(&app, request(mode, &event)).await;
        assert_accepted(status, &headers, &body, &format!("{mode:?}"));
        assert_eq!(
            app.store.event_count(),
            1,
            "{mode:?}: the event key is committed"
        );
        assert_eq!(
            app.store.states().len(),
            1,
            "{mode:?}: the object state is committed"
        );
        assert_eq!(app.store.states()[0].name, "knative-webapp-00001");
        assert_eq!(
            metric(
                &app.metrics,
                "drift_sentinel_events_received_total{type=\"add\",mode=\"resource\"}"
            ),
            1.0,
            "{mode:?}"
        );
    }
}

#[tokio::test]
async fn batch_with_several_events_commits_all() {
    let app = app();
    let mut second = revision();
    second["metadata"]["uid"] = json!("another-uid");
    second["metadata"]["name"] = json!("knative-webapp-00002");
    let events = [
        structured_event("b1", "add", &revision()),
        structured_event("b2", "add", &second),
    ];
    let (status, headers, body) = send(&app, batch_request(&events)).await;
    assert_accepted(status, &headers, &body, "batch");
    assert_eq!(app.store.states().len(), 2);
}

#[tokio::test]
async fn unhandled_type_is_accepted_and_counted_as_ignored_in_every_mode() {
    for mode in MODES {
        let app = app();
        let mut event = structured_event("ignored-1", "add", &revision());
        event["type"] = json!("dev.knative.sources.ping");
        let (status, headers, body) = send(&app, request(mode, &event)).await;
        assert_accepted(status, &headers, &body, &format!("{mode:?}"));
        assert_eq!(
            app.store.event_count(),
            0,
            "{mode:?}: ignored events change nothing"
        );
        assert_eq!(
            metric(
                &app.metrics,
                "drift_sentinel_events_total{outcome=\"ignored\"}"
            ),
            1.0,
            "{mode:?}"
        );
    }
}

#[tokio::test]
async fn reference_mode_event_is_accepted() {
    let app = app();
    let line = std::fs::read_to_string(fixture_path(
        "events/lionelvillard-knative-examples__apiserversource-README__ref-mode-revision-events.ce.jsonl",
    ))
    .unwrap();
    let event: Value = serde_json::from_str(line.lines().nth(2).unwrap()).unwrap();
    for mode in MODES {
        let (status, headers, body) = send(&app, request(mode, &event)).await;
        assert_accepted(status, &headers, &body, &format!("{mode:?}"));
    }
    assert_eq!(
        metric(
            &app.metrics,
            "drift_sentinel_events_total{outcome=\"reference\"}"
        ),
        3.0
    );
}

#[tokio::test]
async fn plain_json_is_not_a_cloudevent() {
    let app = app();
    let request = Request::post("/")
        .header("content-type", "application/json")
        .body(Body::from(r#"{"hello":"world"}"#))
        .unwrap();
    let (status, _, body) = send(&app, request).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error_code(&body), "not_cloudevent");
    assert!(
        body.len() < 768,
        "the useful part must fit the dead-letter excerpt"
    );
}

#[tokio::test]
async fn invalid_events_get_400_naming_the_problem_in_every_mode() {
    // A Resource-mode object without a uid cannot be tracked.
    let mut object = revision();
    object["metadata"].as_object_mut().unwrap().remove("uid");
    for mode in MODES {
        let app = app();
        let event = structured_event("no-uid", "update", &object);
        let (status, _, body) = send(&app, request(mode, &event)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{mode:?}");
        assert_eq!(error_code(&body), "invalid_object", "{mode:?}");
        let text = String::from_utf8_lossy(&body);
        assert!(
            text.contains("data.metadata.uid: missing"),
            "{mode:?}: {text}"
        );
        assert!(body.len() < 768);
        assert_eq!(app.store.event_count(), 0);
    }
}

#[tokio::test]
async fn missing_required_attribute_is_400_in_every_mode() {
    for mode in MODES {
        let app = app();
        let mut event = structured_event("x", "add", &revision());
        event.as_object_mut().unwrap().remove("id");
        let (status, _, body) = send(&app, request(mode, &event)).await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{mode:?}: {}",
            String::from_utf8_lossy(&body)
        );
        let code = error_code(&body);
        assert!(
            code == "invalid_event" || code == "invalid_json",
            "{mode:?}: {code}"
        );
        assert!(String::from_utf8_lossy(&body).contains("id"), "{mode:?}");
    }
}

#[tokio::test]
async fn oversized_batch_is_400() {
    let app = app();
    let events: Vec<Value> = (0..1001)
        .map(|index| {
            let mut event = structured_event(&format!("many-{index}"), "add", &json!({}));
            event["type"] = json!("dev.example.other");
            event
        })
        .collect();
    let (status, _, body) = send(&app, batch_request(&events)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).contains("at most 1000 per request"));
}

#[tokio::test]
async fn error_bodies_stay_short_whatever_the_input() {
    let app = app();
    let mut object = revision();
    object["metadata"]["labels"][format!("k{}", "x".repeat(100_000))] = json!(1);
    let (status, _, body) = send(
        &app,
        structured_request(&structured_event("long", "add", &object)),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.len() < 768, "{} bytes", body.len());
}

#[tokio::test]
async fn malformed_json_is_400() {
    let app = app();
    for content_type in [
        "application/cloudevents+json",
        "application/cloudevents-batch+json",
    ] {
        let request = Request::post("/")
            .header("content-type", content_type)
            .body(Body::from("{\"specversion\": \"1.0\", "))
            .unwrap();
        let (status, _, body) = send(&app, request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{content_type}");
        assert_eq!(error_code(&body), "invalid_json", "{content_type}");
    }
    // Binary mode with a body that is not JSON.
    let mut request = binary_request(&structured_event("bad-body", "add", &revision()));
    *request.body_mut() = Body::from("not json");
    let (status, _, body) = send(&app, request).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error_code(&body), "invalid_json");
}

#[tokio::test]
async fn body_over_the_limit_is_413_in_every_mode() {
    for mode in MODES {
        let app = app_with(64, 8 * 1024, drift_model::time::system_clock());
        let mut object = revision();
        object["metadata"]["annotations"]["big"] = json!("x".repeat(16 * 1024));
        let event = structured_event("big", "update", &object);
        let (status, _, _) = send(&app, request(mode, &event)).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{mode:?}");
        assert_eq!(app.store.event_count(), 0);
    }
}

#[tokio::test]
async fn a_declared_length_over_the_limit_is_the_same_json_413_in_every_mode() {
    // With a `content-length` the limit is known before the body is read; the answer is the
    // same JSON error as when the limit is hit while reading (issue 15, item 9).
    for mode in MODES {
        let app = app_with(64, 8 * 1024, drift_model::time::system_clock());
        let mut object = revision();
        object["metadata"]["annotations"]["big"] = json!("x".repeat(16 * 1024));
        let mut request = request(mode, &structured_event("big-declared", "update", &object));
        let length = {
            use axum::body::HttpBody as _;
            request.body().size_hint().exact().unwrap()
        };
        request
            .headers_mut()
            .insert("content-length", axum::http::HeaderValue::from(length));
        let (status, headers, body) = send(&app, request).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{mode:?}");
        assert_eq!(
            headers.get("content-type").unwrap(),
            "application/json",
            "{mode:?}"
        );
        assert_eq!(error_code(&body), "body_too_large", "{mode:?}");
        assert_eq!(app.store.event_count(), 0);
    }
}

#[tokio::test]
async fn streamed_body_over_the_limit_is_413_with_json_error() {
    // Without a content-length the limit is hit while reading, inside the handler.
    let app = app_with(64, 8 * 1024, drift_model::time::system_clock());
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        (0..4).map(|_| Ok(vec![b' '; 4096])).collect();
    let stream = futures_util_stream(chunks);
    let request = Request::post("/")
        .header("content-type", "application/cloudevents+json")
        .body(Body::from_stream(stream))
        .unwrap();
    let (status, _, body) = send(&app, request).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(error_code(&body), "body_too_large");
}

fn futures_util_stream(
    chunks: Vec<Result<Vec<u8>, std::io::Error>>,
) -> impl futures_core::Stream<Item = Result<Vec<u8>, std::io::Error>> + Send + 'static {
    struct Chunks(std::collections::VecDeque<Result<Vec<u8>, std::io::Error>>);
    impl futures_core::Stream for Chunks {
        type Item = Result<Vec<u8>, std::io::Error>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            std::task::Poll::Ready(self.0.pop_front())
        }
    }
    Chunks(chunks.into())
}

#[tokio::test]
async fn store_failure_is_503_with_retry_after_and_nothing_is_half_applied() {
    for mode in MODES {
        let app = app();
        app.store.set_failing(true);
        let event = structured_event("fails-then-works", "add", &revision());
        let (status, headers, body) = send(&app, request(mode, &event)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{mode:?}");
        assert!(headers.get("retry-after").is_some(), "{mode:?}");
        assert_eq!(error_code(&body), "store");
        // The Broker retries the same event: it must take effect now, not be seen as a duplicate
        // or as stale by an engine that kept the failed round in memory.
        app.store.set_failing(false);
        let (status, headers, body) = send(&app, request(mode, &event)).await;
        assert_accepted(status, &headers, &body, &format!("{mode:?} retry"));
        assert_eq!(app.store.states().len(), 1, "{mode:?}");
        assert_eq!(
            metric(
                &app.metrics,
                "drift_sentinel_events_total{outcome=\"applied\"}"
            ),
            1.0
        );
    }
}

/// A commit whose answer was lost (the connection dropped after COMMIT): the writer asks the
/// store by the round's event keys. Landed: the event is answered 202 and its state kept, so
/// the Broker's redelivery is a duplicate of something the engine has. Not landed: 503, the
/// state rolled back, and the redelivery takes effect.
#[tokio::test]
async fn a_commit_whose_answer_was_lost_is_settled_by_asking_the_store() {
    let first = app();
    first.store.set_lost_commit_answers(Some(true));
    let event = structured_event("landed", "add", &revision());
    let (status, headers, body) = send(&first, structured_request(&event)).await;
    assert_accepted(status, &headers, &body, "landed");
    first.store.set_lost_commit_answers(None);
    assert_eq!(first.store.states().len(), 1);
    assert!(!first
        .pipeline
        .health()
        .lease_lost
        .load(std::sync::atomic::Ordering::SeqCst));

    let other = app();
    other.store.set_lost_commit_answers(Some(false));
    let event = structured_event("not-landed", "add", &revision());
    let (status, _, body) = send(&other, structured_request(&event)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(error_code(&body), "store");
    other.store.set_lost_commit_answers(None);
    let (status, headers, body) = send(&other, structured_request(&event)).await;
    assert_accepted(status, &headers, &body, "redelivered");
    assert_eq!(other.store.states().len(), 1);
    assert_eq!(
        metric(
            &other.metrics,
            "drift_sentinel_events_total{outcome=\"applied\"}"
        ),
        1.0
    );
}

/// A round whose commit answer was lost and that has no event key to ask by (a silence): the
/// writer cannot tell whether it landed, so it gives its role up (the replica reloads) and
/// commits nothing more, whatever comes after.
#[tokio::test]
async fn a_round_whose_outcome_cannot_be_told_gives_the_writer_role_up() {
    let app = app();
    app.store.set_lost_commit_answers(Some(true));
    let pipeline = app.pipeline.clone();
    let silenced = tokio::task::spawn_blocking(move || {
        pipeline.silence(drift_sentinel::pipeline::SilenceRequest::Add(
            drift_model::Silence {
                matchers: [("name".to_string(), "web".to_string())].into(),
                expires_at: None,
                comment: Some("lost answer".to_string()),
            },
        ))
    })
    .await
    .unwrap()
    .expect("queued")
    .await
    .expect("answered");
    assert!(silenced.is_err(), "{silenced:?}");
    let health = app.pipeline.health();
    assert!(health.gave_up.load(std::sync::atomic::Ordering::SeqCst));
    app.store.set_lost_commit_answers(None);
    let commits = app.store.commit_count();
    let event = structured_event("after-giving-up", "add", &revision());
    let (status, _, _) = send(&app, structured_request(&event)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        app.store.commit_count(),
        commits,
        "nothing committed after giving up"
    );
    assert!(app.store.states().is_empty());
}

#[tokio::test]
async fn full_queue_is_503_with_retry_after() {
    let app = app_with(1, 4 * 1024 * 1024, drift_model::time::system_clock());
    app.store.set_blocked(true);
    let mut handles = Vec::new();
    // The writer takes the first request and blocks in commit; the second fills the queue.
    for index in 0..2 {
        let router = app.router.clone();
        let mut object = revision();
        object["metadata"]["uid"] = json!(format!("uid-{index}"));
        let event = structured_event(&format!("q{index}"), "add", &object);
        handles.push(tokio::spawn(async move {
            router
                .oneshot(structured_request(&event))
                .await
                .unwrap()
                .status()
        }));
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let (status, headers, body) = send(
        &app,
        structured_request(&structured_event("q-over", "add", &revision())),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers.get("retry-after").unwrap(), "1");
    assert_eq!(error_code(&body), "overloaded");
    app.store.set_blocked(false);
    for handle in handles {
        assert_eq!(handle.await.unwrap(), StatusCode::ACCEPTED);
    }
}

#[tokio::test]
async fn draining_is_503_and_not_ready() {
    let app = app();
    app.draining
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (status, headers, _) = send(
        &app,
        structured_request(&structured_event("d", "add", &revision())),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(headers.get("retry-after").is_some());
    let (status, _, _) = send(&app, Request::get("/readyz").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let (status, _, _) = send(&app, Request::get("/healthz").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn liveness_fails_once_a_sync_of_the_store_failed() {
    // What the sync thread sets when an fsync fails: only a restart recovers.
    let app = app();
    let (status, _, _) = send(&app, Request::get("/healthz").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    app.pipeline
        .health()
        .must_restart
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (status, _, body) = send(&app, Request::get("/healthz").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        String::from_utf8_lossy(&body).contains("restart"),
        "{body:?}"
    );
}

/// Every `503` is JSON `{code, message}` with `Retry-After`, whoever answers it (issue 15,
/// item 3): the request timeout, readiness, the API.
fn assert_json_503(status: StatusCode, headers: &axum::http::HeaderMap, body: &[u8], what: &str) {
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{what}");
    let seconds: u64 = headers
        .get("retry-after")
        .unwrap_or_else(|| panic!("{what}: no Retry-After"))
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(seconds >= 1, "{what}");
    assert_eq!(
        headers.get("content-type").unwrap(),
        "application/json",
        "{what}"
    );
    error_code(body);
}

#[tokio::test]
async fn a_request_timeout_is_a_json_503_with_retry_after() {
    let app = app_with_request_timeout(std::time::Duration::from_millis(300));
    // The writer holds the round in its commit past the request timeout.
    app.store.set_blocked(true);
    let (status, headers, body) = send(
        &app,
        structured_request(&structured_event("slow-commit", "add", &revision())),
    )
    .await;
    assert_json_503(status, &headers, &body, "request timeout");
    assert_eq!(error_code(&body), "request_timeout");
    assert_eq!(
        metric(
            &app.metrics,
            "drift_sentinel_ingest_errors_total{kind=\"request_timeout\"}"
        ),
        1.0
    );
    app.store.set_blocked(false);
}

#[tokio::test]
async fn readiness_and_api_503s_are_json_with_retry_after() {
    let app = app();
    app.draining
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (status, headers, body) =
        send(&app, Request::get("/readyz").body(Body::empty()).unwrap()).await;
    assert_json_503(status, &headers, &body, "readyz while draining");
    assert_eq!(error_code(&body), "draining");
    // The test app has no audit store: the API answers 503 through the same error type.
    let (status, headers, body) = send(
        &app,
        Request::get("/api/v1/drifts").body(Body::empty()).unwrap(),
    )
    .await;
    assert_json_503(status, &headers, &body, "API without an audit store");
}

#[tokio::test]
async fn a_413_or_503_made_outside_api_error_is_the_same_json() {
    // axum's form and JSON extractors answer a body over their limit with a plain-text 413; the
    // edge turns any such answer into the JSON every other error has.
    let routes = axum::Router::new()
        .route(
            "/plain-413",
            axum::routing::post(|| async {
                (StatusCode::PAYLOAD_TOO_LARGE, "length limit exceeded")
            }),
        )
        .route(
            "/plain-503",
            axum::routing::get(|| async { StatusCode::SERVICE_UNAVAILABLE }),
        );
    let app = app_with_routes(routes);
    let (status, headers, body) = send(
        &app,
        Request::post("/plain-413").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(headers.get("content-type").unwrap(), "application/json");
    assert_eq!(error_code(&body), "body_too_large");
    let (status, headers, body) = send(
        &app,
        Request::get("/plain-503").body(Body::empty()).unwrap(),
    )
    .await;
    assert_json_503(status, &headers, &body, "a bare 503");
}

#[tokio::test]
async fn ready_when_store_writable_and_not_when_it_fails() {
    let app = app();
    let (status, _, _) = send(&app, Request::get("/readyz").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    app.store.set_failing(true);
    let _ = send(
        &app,
        structured_request(&structured_event("r", "add", &revision())),
    )
    .await;
    let (status, headers, body) =
        send(&app, Request::get("/readyz").body(Body::empty()).unwrap()).await;
    assert_json_503(status, &headers, &body, "readyz, store not writable");
    assert_eq!(error_code(&body), "store_not_writable");
}

#[tokio::test]
async fn duplicate_delivery_takes_effect_once_in_every_mode() {
    for mode in MODES {
        let app = app();
        let event = structured_event("dup-1", "add", &revision());
        for _ in 0..3 {
            let (status, headers, body) = send(&app, request(mode, &event)).await;
            assert_accepted(status, &headers, &body, &format!("{mode:?}"));
        }
        assert_eq!(app.store.event_count(), 1);
        assert_eq!(
            metric(
                &app.metrics,
                "drift_sentinel_events_total{outcome=\"applied\"}"
            ),
            1.0
        );
        assert_eq!(
            metric(
                &app.metrics,
                "drift_sentinel_events_total{outcome=\"duplicate\"}"
            ),
            2.0,
            "{mode:?}"
        );
    }
}

/// The key is the event's `time`, `source` and `id`: the same `source` and `id` sent at another
/// time is not a redelivery but an event like any other (here the same object state, sent
/// later: applied, and it changes nothing, so it writes no key); a redelivery keeps its time
/// and stays a duplicate.
#[tokio::test]
async fn the_same_id_sent_at_another_time_is_another_event() {
    let app = app();
    let first = structured_event("dup-time", "add", &revision());
    let mut later = first.clone();
    later["time"] = json!("2023-10-09T21:40:00.5Z");
    for (event, name) in [(&first, "first"), (&later, "later"), (&first, "again")] {
        let (status, headers, body) = send(&app, binary_request(event)).await;
        assert_accepted(status, &headers, &body, name);
    }
    assert_eq!(app.store.event_count(), 1);
    let count = |outcome: &str| {
        metric(
            &app.metrics,
            &format!("drift_sentinel_events_total{{outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(count("applied"), 2.0);
    assert_eq!(count("duplicate"), 1.0);
    assert_eq!(app.store.states().len(), 1);
}

#[tokio::test]
async fn duplicate_within_one_batch_takes_effect_once() {
    let app = app();
    let event = structured_event("dup-batch", "add", &revision());
    let (status, headers, body) = send(&app, batch_request(&[event.clone(), event])).await;
    assert_accepted(status, &headers, &body, "batch");
    assert_eq!(
        metric(
            &app.metrics,
            "drift_sentinel_events_total{outcome=\"duplicate\"}"
        ),
        1.0
    );
}

#[tokio::test]
async fn out_of_order_update_does_not_roll_state_back() {
    let app = app();
    let mut newer = revision();
    newer["metadata"]["resourceVersion"] = json!("7749790");
    newer["status"]["actualReplicas"] = json!(3);
    let mut older = revision();
    older["metadata"]["resourceVersion"] = json!("7749780");
    older["status"]["actualReplicas"] = json!(1);
    for (id, object) in [("new", &newer), ("old", &older)] {
        let (status, headers, body) = send(
            &app,
            binary_request(&structured_event(id, "update", object)),
        )
        .await;
        assert_accepted(status, &headers, &body, id);
    }
    let objects = app.store.states();
    assert_eq!(objects[0].resource_version, "7749790");
    assert_eq!(objects[0].status.value()["actualReplicas"], json!(3));
    assert_eq!(
        metric(
            &app.metrics,
            "drift_sentinel_events_total{outcome=\"stale\"}"
        ),
        1.0
    );
}

#[tokio::test]
async fn update_after_delete_is_stale() {
    let app = app();
    let mut deleted = revision();
    deleted["metadata"]["resourceVersion"] = json!("7749800");
    let mut late = revision();
    late["metadata"]["resourceVersion"] = json!("7749799");
    send(
        &app,
        binary_request(&structured_event("del", "delete", &deleted)),
    )
    .await;
    send(
        &app,
        binary_request(&structured_event("late", "update", &late)),
    )
    .await;
    let objects = app.store.states();
    assert!(objects[0].deleted, "the tombstone stays");
    assert_eq!(objects[0].resource_version, "7749800");
}

#[tokio::test]
async fn cluster_comes_from_the_extension() {
    let app = app();
    let mut event = structured_event("c1", "add", &revision());
    event["cluster"] = json!("prod-eu");
    send(&app, binary_request(&event)).await;
    assert_eq!(app.store.states()[0].cluster, "prod-eu");
}

#[tokio::test]
async fn secret_values_never_reach_the_store() {
    let app = app();
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "dingtalk", "namespace": "drift-sentinel", "uid": "s1", "resourceVersion": "5"},
        "data": {"token": "Q0FOQVJZLXNlY3JldC12YWx1ZQ=="}});
    send(
        &app,
        structured_request(&structured_event("s1", "add", &secret)),
    )
    .await;
    // What the SQLite store writes for each object.
    let stored: String = app
        .store
        .states()
        .iter()
        .map(|object| drift_core::classify::stored::encode(object).unwrap())
        .collect();
    assert!(stored.contains("token"), "key names are kept");
    assert!(
        !stored.contains("Q0FOQVJZLXNlY3JldC12YWx1ZQ=="),
        "values are not"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_changes_nothing_durable_does_not_wait_for_the_commit() {
    let app = app();
    let spawn = |object: Value, id: &str, verb: &str| {
        let router = app.router.clone();
        let request = binary_request(&structured_event(id, verb, &object));
        tokio::spawn(async move { router.oneshot(request).await.unwrap().status() })
    };
    let with_uid = |uid: &str| {
        let mut object = revision();
        object["metadata"]["uid"] = json!(uid);
        object["metadata"]["name"] = json!(format!("rev-{uid}"));
        object
    };
    let tracked = with_uid("tracked");
    assert_eq!(
        spawn(tracked.clone(), "t-1", "add").await.unwrap(),
        StatusCode::ACCEPTED
    );
    let commits = app.store.commit_count();
    // Hold the next commit: a new object's round waits in it.
    app.store.set_block_at(Some(commits));
    let first = spawn(with_uid("first"), "f-1", "add");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    // Queued behind it, so applied together in the next round: a new object (durable) and
    // status churn of the tracked one (same content, newer resourceVersion).
    let durable = spawn(with_uid("second"), "s-1", "add");
    let mut churn = tracked.clone();
    crate::scenario::bump(&mut churn);
    let churn = spawn(churn, "t-2", "update");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!first.is_finished() && !durable.is_finished() && !churn.is_finished());
    // Let the first round commit and hold the next one.
    app.store.set_block_at(Some(commits + 1));
    let answered = tokio::time::timeout(std::time::Duration::from_secs(10), churn)
        .await
        .expect("the churn is answered while its round's commit waits")
        .unwrap();
    assert_eq!(answered, StatusCode::ACCEPTED);
    assert_eq!(first.await.unwrap(), StatusCode::ACCEPTED);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(
        !durable.is_finished(),
        "a durable event still waits for its commit"
    );
    app.store.set_block_at(None);
    assert_eq!(durable.await.unwrap(), StatusCode::ACCEPTED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivery_of_an_event_its_round_wrote_waits_for_the_commit() {
    // Found in review: a duplicate answered at once would tell the Broker the event is stored
    // while the write it repeats is not yet committed.
    let app = app();
    let spawn = |object: Value, id: &str| {
        let router = app.router.clone();
        let request = binary_request(&structured_event(id, "add", &object));
        tokio::spawn(async move { router.oneshot(request).await.unwrap().status() })
    };
    let mut object = revision();
    object["metadata"]["uid"] = json!("held");
    assert_eq!(
        spawn(revision(), "warm-1").await.unwrap(),
        StatusCode::ACCEPTED
    );
    let commits = app.store.commit_count();
    // Hold the next commit: a new object's round waits in it.
    app.store.set_block_at(Some(commits));
    let mut blocking = revision();
    blocking["metadata"]["uid"] = json!("blocking");
    let first = spawn(blocking, "warm-2");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    // Both in the next round: the event, and the same event again.
    let original = spawn(object.clone(), "again-1");
    let repeated = spawn(object, "again-1");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    app.store.set_block_at(Some(commits + 1));
    assert_eq!(first.await.unwrap(), StatusCode::ACCEPTED);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        !original.is_finished() && !repeated.is_finished(),
        "the repeat was answered before the write it repeats was committed"
    );
    app.store.set_block_at(None);
    assert_eq!(original.await.unwrap(), StatusCode::ACCEPTED);
    assert_eq!(repeated.await.unwrap(), StatusCode::ACCEPTED);
}

#[tokio::test]
async fn unknown_paths_and_methods_get_json_errors() {
    // Found in the README walkthrough: the router's own 404 and 405 had empty bodies.
    let app = app();
    for (method, path, status, code) in [
        ("GET", "/nothing", StatusCode::NOT_FOUND, "not_found"),
        ("GET", "/api/v1/nothing", StatusCode::NOT_FOUND, "not_found"),
        (
            "GET",
            "/",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            "POST",
            "/healthz",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
    ] {
        let response = app
            .router
            .clone()
            .oneshot(
                Request::builder()
                    .method(method)
                    .uri(path)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{method} {path}");
        let body: serde_json::Value =
            serde_json::from_slice(&body_bytes(response).await).expect("JSON");
        assert_eq!(body["code"], code, "{method} {path}");
    }
    // `GET /` is not a CloudEvents request: not counted among their answers, as a `POST /`
    // is, refused or not.
    let refused = app
        .router
        .clone()
        .oneshot(
            Request::builder()
                .method("POST")
                .uri("/")
                .header("content-type", "application/cloudevents+json")
                .body(Body::from("not json"))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let rendered = app.metrics.render();
    assert!(
        rendered.contains("drift_sentinel_ingest_responses_total{code=\"400\"} 1"),
        "{rendered}"
    );
    assert!(
        !rendered.contains("drift_sentinel_ingest_responses_total{code=\"405\"}"),
        "{rendered}"
    );
}

/// Issue 27, item 9: a batch holding one event of a cluster the shard does not own is refused
/// whole (one answer has one status), with a message naming the event and the count of owned
/// events refused with it; nothing of it is stored, and the refused events are counted by cause.
#[tokio::test]
async fn a_shards_batch_with_one_foreign_cluster_is_a_421_counted_by_cause() {
    let shard = drift_core::config::ShardConfig {
        name: "east".into(),
        clusters: vec!["east-*".into()],
        ..Default::default()
    };
    let app = app_with_shard(shard);
    let events: Vec<Value> = [("b-1", "east-1"), ("b-2", "west-1"), ("b-3", "east-2")]
        .iter()
        .enumerate()
        .map(|(index, (id, cluster))| {
            let mut object = revision();
            object["metadata"]["uid"] = json!(format!("uid-{index}"));
            let mut event = structured_event(id, "add", &object);
            event["cluster"] = json!(cluster);
            event
        })
        .collect();
    let (status, _, body) = send(&app, batch_request(&events)).await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["code"], "cluster_not_in_shard");
    assert_eq!(
        body["message"],
        "batch[1]: the whole batch of 3 events is refused (2 of them owned here): send each shard's events in their own request; cluster \"west-1\" is not owned by shard \"east\" (shard.clusters: east-*): the Trigger of the shard that owns it should receive this event"
    );
    assert_eq!(app.store.event_count(), 0, "nothing of the batch is stored");
    let count = |outcome: &str| {
        metric(
            &app.metrics,
            &format!("drift_sentinel_shard_events_total{{shard=\"east\",outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(
        (
            count("refused"),
            count("refused_with_batch"),
            count("owned")
        ),
        (1.0, 2.0, 0.0)
    );
    // The owned events sent on their own are taken; a single foreign one is a plain 421.
    let owned: Vec<Value> = vec![events[0].clone(), events[2].clone()];
    let (status, _, body) = send(&app, batch_request(&owned)).await;
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    let (status, _, body) = send(&app, structured_request(&events[1])).await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("cluster \"west-1\""),
        "{body}"
    );
    assert_eq!(
        (
            count("refused"),
            count("refused_with_batch"),
            count("owned")
        ),
        (2.0, 2.0, 2.0)
    );
}
