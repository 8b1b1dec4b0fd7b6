//! Admission: request bytes in flight are capped (16 bodies of `bodyLimitBytes`); beyond the cap
//! a request is refused at once with `503` and `Retry-After`, before its body is read, and the
//! service takes events again as soon as the load is gone.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use drift_core::config::IN_FLIGHT_BODIES;
use tower::ServiceExt;

use crate::support::*;

/// A body that sends one chunk and then never ends: the request stays in flight.
fn stalled_body() -> Body {
    struct Stalled(bool);
    impl futures_core::Stream for Stalled {
        type Item = Result<Vec<u8>, std::io::Error>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            if self.0 {
                std::task::Poll::Pending
            } else {
                self.0 = true;
                std::task::Poll::Ready(Some(Ok(b"{".to_vec())))
            }
        }
    }
    Body::from_stream(Stalled(false))
}

/// One more request declaring `bytes` (whose body never ends): refused or not by the budget
/// alone.
async fn one_more(app: &crate::support::TestApp, bytes: usize) -> axum::response::Response {
    app.router
        .clone()
        .oneshot(
            Request::post("/")
                .header("content-type", "application/cloudevents+json")
                .header("content-length", bytes.to_string())
                .body(stalled_body())
                .unwrap(),
        )
        .await
        .unwrap()
}

/// Starts `count` requests declaring `bytes` whose bodies never finish; they hold their budget.
async fn stall(
    app: &crate::support::TestApp,
    count: usize,
    bytes: usize,
) -> Vec<tokio::task::JoinHandle<Result<axum::response::Response, std::convert::Infallible>>> {
    let mut stalled = Vec::new();
    for _ in 0..count {
        let request = Request::post("/")
            .header("content-type", "application/cloudevents+json")
            .header("content-length", bytes.to_string())
            .body(stalled_body())
            .unwrap();
        let router = app.router.clone();
        stalled.push(tokio::spawn(async move { router.oneshot(request).await }));
        tokio::task::yield_now().await;
    }
    stalled
}

/// Starts `count` chunked requests (no `content-length`) whose bodies never finish.
async fn stall_chunked(
    app: &crate::support::TestApp,
    count: usize,
) -> Vec<tokio::task::JoinHandle<Result<axum::response::Response, std::convert::Infallible>>> {
    let mut stalled = Vec::new();
    for _ in 0..count {
        let request = Request::post("/")
            .header("content-type", "application/cloudevents+json")
            .body(stalled_body())
            .unwrap();
        let router = app.router.clone();
        stalled.push(tokio::spawn(async move { router.oneshot(request).await }));
        tokio::task::yield_now().await;
    }
    stalled
}

/// A valid binary-mode event whose body is exactly `bytes` long (padded with an annotation).
fn event_of_size(id: &str, bytes: usize) -> Request<Body> {
    let mut object = revision();
    object["metadata"]["uid"] = serde_json::json!(format!("uid-{id}"));
    object["metadata"]["annotations"]["pad"] = serde_json::json!("");
    let base = serde_json::to_vec(&object).unwrap().len();
    assert!(bytes > base, "{bytes} > {base}");
    object["metadata"]["annotations"]["pad"] = serde_json::json!("x".repeat(bytes - base));
    let request = binary_request(&structured_event(id, "add", &object));
    let (mut parts, body) = request.into_parts();
    parts.headers.insert(
        "content-length",
        axum::http::HeaderValue::from(bytes as u64),
    );
    Request::from_parts(parts, body)
}

#[tokio::test]
async fn slow_senders_hold_only_the_bytes_they_sent() {
    // Issue 15, item 2: sixteen senders that declare the largest body (or send chunked) and
    // then trickle used to reserve the whole budget and make valid senders get 503. The budget
    // now holds the bytes that arrived, so valid events are accepted while they trickle.
    let limit = 8 * 1024;
    let app = app_with(64, limit, drift_model::time::system_clock());
    let mut stalled = Vec::new();
    for chunked in [false, true] {
        if chunked {
            stalled.extend(stall_chunked(&app, IN_FLIGHT_BODIES).await);
        } else {
            stalled.extend(stall(&app, IN_FLIGHT_BODIES, limit).await);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        for index in 0..4 {
            let response = app
                .router
                .clone()
                .oneshot(structured_request(&structured_event(
                    &format!("valid-while-trickling-{chunked}-{index}"),
                    "add",
                    &revision(),
                )))
                .await
                .unwrap();
            assert_eq!(
                response.status(),
                StatusCode::ACCEPTED,
                "valid event {index} while {} senders trickle (chunked: {chunked})",
                stalled.len()
            );
        }
    }
    assert!(
        stalled.iter().all(|task| !task.is_finished()),
        "the trickling senders are still being read"
    );
    assert_eq!(
        metric(
            &app.metrics,
            "drift_sentinel_ingest_errors_total{kind=\"overloaded\"}"
        ),
        0.0
    );
    for task in stalled {
        task.abort();
    }
}

#[tokio::test]
async fn request_bytes_in_flight_are_capped_with_503_and_retry_after() {
    let limit = 8 * 1024;
    // Room for three bodies of the largest size.
    let app = crate::support::app_with_budget(limit, 3 * limit);
    // Three bodies arrive whole and wait for their commit (the writer is held): they hold
    // their bytes until they are answered.
    app.store.set_blocked(true);
    let mut held = Vec::new();
    for index in 0..3 {
        let router = app.router.clone();
        let request = event_of_size(&format!("held-{index}"), limit - 100);
        held.push(tokio::spawn(async move {
            router.oneshot(request).await.unwrap().status()
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(held.iter().all(|task| !task.is_finished()));
    // One more that does not fit in what is left: refused at once, without its body being
    // read (it never ends).
    let started = Instant::now();
    let response = one_more(&app, 1024).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["retry-after"], "1");
    assert!(started.elapsed() < Duration::from_secs(1));
    let body: serde_json::Value = serde_json::from_slice(&body_bytes(response).await).unwrap();
    assert_eq!(body["code"], "overloaded");
    assert_eq!(
        metric(
            &app.metrics,
            "drift_sentinel_ingest_errors_total{kind=\"overloaded\"}"
        ),
        1.0
    );
    // The commits land: the held requests are answered, their bytes are returned and events
    // are accepted again.
    app.store.set_blocked(false);
    for task in held {
        assert_eq!(task.await.unwrap(), StatusCode::ACCEPTED);
    }
    let response = app
        .router
        .clone()
        .oneshot(structured_request(&structured_event(
            "after-overload",
            "add",
            &revision(),
        )))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
}

/// A body that sends `chunk` every `every`, `count` times, then ends (`None`: never ends).
fn paced_body(chunk: &'static [u8], every: Duration, count: Option<usize>) -> Body {
    struct Paced {
        chunk: &'static [u8],
        every: Duration,
        left: Option<usize>,
        sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    }
    impl futures_core::Stream for Paced {
        type Item = Result<Vec<u8>, std::io::Error>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            if self.left == Some(0) {
                return std::task::Poll::Ready(None);
            }
            let every = self.every;
            let sleep = self
                .sleep
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(every)));
            if sleep.as_mut().poll(cx).is_pending() {
                return std::task::Poll::Pending;
            }
            self.sleep = None;
            if let Some(left) = &mut self.left {
                *left -= 1;
            }
            std::task::Poll::Ready(Some(Ok(self.chunk.to_vec())))
        }
    }
    use std::future::Future as _;
    Body::from_stream(Paced {
        chunk,
        every,
        left: count,
        sleep: None,
    })
}

#[tokio::test]
async fn a_body_below_the_minimum_rate_is_cut_off_with_408_and_a_faster_one_is_not() {
    let pace = drift_sentinel::ingest::admission::BodyPace {
        grace: Duration::from_millis(500),
        min_bytes_per_second: 1000,
    };
    let app = crate::support::app_with_pace(4 * 1024 * 1024, 64 * 1024 * 1024, pace);
    // Declares 4 MiB and sends a byte every 200 ms (5 B/s); and the same chunked.
    for declared in [true, false] {
        let mut request = Request::post("/").header("content-type", "application/json");
        if declared {
            request = request.header("content-length", (4 * 1024 * 1024).to_string());
        }
        let request = request
            .body(paced_body(b" ", Duration::from_millis(200), None))
            .unwrap();
        let started = Instant::now();
        let response = app.router.clone().oneshot(request).await.unwrap();
        let took = started.elapsed();
        assert_eq!(
            response.status(),
            StatusCode::REQUEST_TIMEOUT,
            "declared: {declared}"
        );
        assert!(took >= pace.grace, "never before the grace: {took:?}");
        assert!(took < Duration::from_secs(20), "{took:?}");
        assert_eq!(response.headers()["connection"], "close");
        let body: serde_json::Value = serde_json::from_slice(&body_bytes(response).await).unwrap();
        assert_eq!(body["code"], "body_too_slow");
    }
    assert_eq!(
        metric(
            &app.metrics,
            "drift_sentinel_ingest_errors_total{kind=\"body_too_slow\"}"
        ),
        2.0
    );
    // 200 bytes every 50 ms (4 kB/s) for a second and a half: past the grace, above the rate.
    let request = Request::post("/")
        .header("content-type", "application/cloudevents+json")
        .body(paced_body(
            &[b' '; 200],
            Duration::from_millis(50),
            Some(30),
        ))
        .unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    assert_eq!(
        response.status(),
        StatusCode::BAD_REQUEST,
        "read to the end (and then found not to be JSON)"
    );
}

#[tokio::test]
async fn a_body_that_runs_the_budget_dry_while_arriving_is_503_and_closes() {
    let limit = 8 * 1024;
    let app = crate::support::app_with_budget(limit, limit);
    // A chunked sender holds the 4 KiB it sent.
    let held = {
        let request = Request::post("/")
            .header("content-type", "application/cloudevents+json")
            .body(Body::from_stream(first_then_stall(vec![b' '; 4096])))
            .unwrap();
        let router = app.router.clone();
        tokio::spawn(async move { router.oneshot(request).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!held.is_finished());
    // Another, chunked, sends 6 KiB in 1 KiB pieces: admitted (room is left), refused when the
    // budget runs dry.
    let request = Request::post("/")
        .header("content-type", "application/cloudevents+json")
        .body(paced_body(&[b' '; 1024], Duration::from_millis(5), Some(6)))
        .unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["retry-after"], "1");
    assert_eq!(response.headers()["connection"], "close");
    let body: serde_json::Value = serde_json::from_slice(&body_bytes(response).await).unwrap();
    assert_eq!(body["code"], "overloaded");
    held.abort();
}

/// A body stream that sends `first` and then never ends.
fn first_then_stall(
    first: Vec<u8>,
) -> impl futures_core::Stream<Item = Result<Vec<u8>, std::io::Error>> + Send + 'static {
    struct Then(Option<Vec<u8>>);
    impl futures_core::Stream for Then {
        type Item = Result<Vec<u8>, std::io::Error>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            match self.0.take() {
                Some(bytes) => std::task::Poll::Ready(Some(Ok(bytes))),
                None => std::task::Poll::Pending,
            }
        }
    }
    Then(Some(first))
}

#[tokio::test]
async fn small_requests_are_not_limited_by_the_largest_body() {
    // Reservations are the declared length, so many ordinary events fit at once.
    let app = app_with(1024, 4 * 1024 * 1024, drift_model::time::system_clock());
    let mut tasks = Vec::new();
    for index in 0..200 {
        let mut object = revision();
        object["metadata"]["uid"] = serde_json::json!(format!("uid-small-{index}"));
        let request = binary_request(&structured_event(&format!("small-{index}"), "add", &object));
        let router = app.router.clone();
        tasks.push(tokio::spawn(async move {
            router.oneshot(request).await.unwrap().status()
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), StatusCode::ACCEPTED);
    }
}

#[test]
fn an_in_flight_budget_below_one_request_is_a_config_error() {
    let error = drift_core::config::load_str(
        "server: {bodyLimitBytes: 65536, inFlightBytes: 1024}",
        &|_| None,
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("server.inFlightBytes"), "{error}");
    let config =
        drift_core::config::load_str("server: {bodyLimitBytes: 65536}", &|_| None).unwrap();
    assert_eq!(config.server.in_flight_limit(), 16 * 65536);
}

#[test]
fn connection_and_body_limits_have_defaults_and_are_validated() {
    let config = drift_core::config::load_str("{}", &|_| None).unwrap();
    let server = &config.server;
    assert_eq!(server.header_read_timeout, Duration::from_secs(10));
    assert_eq!(server.idle_timeout, Duration::from_secs(75));
    assert_eq!(server.max_connections, 512);
    assert_eq!(server.body_read_timeout, Duration::from_secs(10));
    assert_eq!(server.body_min_bytes_per_second, 65536);
    let config = drift_core::config::load_str(
        "server: {headerReadTimeout: 2s, idleTimeout: 1m, maxConnections: 64, \
         bodyReadTimeout: 5s, bodyMinBytesPerSecond: 1024}",
        &|_| None,
    )
    .unwrap();
    assert_eq!(config.server.header_read_timeout, Duration::from_secs(2));
    assert_eq!(config.server.idle_timeout, Duration::from_secs(60));
    assert_eq!(config.server.max_connections, 64);
    for (yaml, key) in [
        (
            "server: {headerReadTimeout: 0s}",
            "server.headerReadTimeout",
        ),
        ("server: {idleTimeout: 0s}", "server.idleTimeout"),
        ("server: {maxConnections: 0}", "server.maxConnections"),
        ("server: {bodyReadTimeout: 0s}", "server.bodyReadTimeout"),
        (
            "server: {bodyMinBytesPerSecond: 0}",
            "server.bodyMinBytesPerSecond",
        ),
    ] {
        let error = drift_core::config::load_str(yaml, &|_| None)
            .unwrap_err()
            .to_string();
        assert!(error.contains(key), "{yaml}: {error}");
    }
}
