//! Admission: a cap on the request bytes `POST /` holds at once.
//!
//! The writer queue (`server.queueCapacity`) bounds events waiting to be committed, but every
//! request is read and decoded before it reaches the queue, so without a cap the memory of an
//! overloaded sink grows with the number of senders. Each request reserves its `content-length`
//! (the whole body limit when it has none) from a budget of `server.inFlightBytes` (by default
//! [`crate::config::IN_FLIGHT_BODIES`] times `server.bodyLimitBytes`) before its body is read, and keeps it
//! until it is answered. When the
//! budget is spent the request is refused at once, before its body is read: `503` with
//! `Retry-After`, which the Broker retries.

use std::sync::Arc;

use axum::body::HttpBody as _;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::ApiError;
use crate::metrics::{CodeLabel, KindLabel, Metrics};

/// Budget accounting unit: permits are KiB, so budgets up to terabytes fit a `u32`.
const UNIT: usize = 1024;

/// The shared budget of the ingest route.
#[derive(Clone)]
pub struct Admission {
    budget: Arc<Semaphore>,
    body_limit: usize,
    metrics: Arc<Metrics>,
}

impl Admission {
    /// A budget of `in_flight` bytes for requests of at most `body_limit` bytes.
    pub fn new(body_limit: usize, in_flight: usize, metrics: Arc<Metrics>) -> Admission {
        let permits = units(in_flight.max(body_limit));
        Admission {
            budget: Arc::new(Semaphore::new(permits as usize)),
            body_limit,
            metrics,
        }
    }
}

fn units(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(UNIT).max(1)).unwrap_or(u32::MAX)
}

/// Middleware: reserves the request's bytes or refuses it with `503`.
pub(crate) async fn admit(
    State(admission): State<Admission>,
    request: Request,
    next: Next,
) -> Response {
    // The body's exact size when known (hyper takes it from `content-length`), else the header.
    let declared = request
        .body()
        .size_hint()
        .exact()
        .and_then(|bytes| usize::try_from(bytes).ok())
        .or_else(|| {
            request
                .headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|value| value.to_str().ok())
                .and_then(|text| text.trim().parse::<usize>().ok())
        });
    // Over-limit bodies are the body-limit layer's to refuse (413); reserve at most the limit.
    let wanted = declared
        .unwrap_or(admission.body_limit)
        .min(admission.body_limit);
    match Arc::clone(&admission.budget).try_acquire_many_owned(units(wanted)) {
        Ok(permit) => {
            let response = next.run(request).await;
            drop(permit);
            response
        }
        Err(_) => {
            admission
                .metrics
                .ingest_errors
                .get_or_create(&KindLabel::new("overloaded"))
                .inc();
            admission
                .metrics
                .responses
                .get_or_create(&CodeLabel {
                    code: "503".to_string(),
                })
                .inc();
            ApiError {
                status: StatusCode::SERVICE_UNAVAILABLE,
                code: "overloaded",
                message: "too much request data in flight; retry later".to_string(),
                retry_after: Some(1),
            }
            .into_response()
        }
    }
}
