//! Admission: request bytes in flight are capped (16 bodies of `bodyLimitBytes`); beyond the cap
//! a request is refused at once with `503` and `Retry-After`, before its body is read, and the
//! service takes events again as soon as the load is gone.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use drift_sentinel::config::IN_FLIGHT_BODIES;
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

/// One more small request (whose body never ends either): refused or not by the budget alone.
async fn one_more(app: &crate::support::TestApp) -> axum::response::Response {
    app.router
        .clone()
        .oneshot(
            Request::post("/")
                .header("content-type", "application/cloudevents+json")
                .header("content-length", "100")
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

#[tokio::test]
async fn request_bytes_in_flight_are_capped_with_503_and_retry_after() {
    let limit = 8 * 1024;
    let app = app_with(64, limit, drift_sentinel::time::system_clock());
    // Fill the budget with requests whose bodies never finish.
    let stalled = stall(&app, IN_FLIGHT_BODIES, limit).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(stalled.iter().all(|task| !task.is_finished()));
    // One more: refused at once, without its body being read (it never ends either).
    let started = Instant::now();
    let response = one_more(&app).await;
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
    // The senders go away: their reservations are returned and events are accepted again.
    for task in &stalled {
        task.abort();
    }
    for task in stalled {
        let _ = task.await;
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

#[tokio::test]
async fn small_requests_are_not_limited_by_the_largest_body() {
    // Reservations are the declared length, so many ordinary events fit at once.
    let app = app_with(1024, 4 * 1024 * 1024, drift_sentinel::time::system_clock());
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

#[tokio::test]
async fn the_in_flight_budget_follows_the_configured_bytes() {
    let limit = 8 * 1024;
    // Room for exactly three bodies of the largest size.
    let app = crate::support::app_with_budget(limit, 3 * limit);
    let stalled = stall(&app, 3, limit).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(stalled.iter().all(|task| !task.is_finished()), "three fit");
    let response = one_more(&app).await;
    assert_eq!(
        response.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "a fourth does not"
    );
    for task in stalled {
        task.abort();
    }
}

#[test]
fn an_in_flight_budget_below_one_request_is_a_config_error() {
    let error = drift_sentinel::config::load_str(
        "server: {bodyLimitBytes: 65536, inFlightBytes: 1024}",
        &|_| None,
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("server.inFlightBytes"), "{error}");
    let config =
        drift_sentinel::config::load_str("server: {bodyLimitBytes: 65536}", &|_| None).unwrap();
    assert_eq!(config.server.in_flight_limit(), 16 * 65536);
}
