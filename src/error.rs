//! The HTTP error answer, the one type every route of this service answers errors with (`POST /`
//! in `ingest`, the drift API and the dashboard in `api`): JSON `{code, message}` with a stable
//! `code`, and `Retry-After` on every `503`, whose reasons are [`Unavailable`]. The middleware
//! [`uniform_errors`] replaces a `413`, `503`, `404` or `405` that some layer made without it
//! (axum's extractors and router) by the same JSON.

use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::pipeline;
use drift_core::decode;

/// An error answer: stable `code`, short `message`, and `Retry-After` on every `503`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    retry_after: Option<u32>,
    /// Close the connection after answering (the rest of the request body is never read).
    close: bool,
}

/// `Retry-After` of a `503` whose maker named no particular wait (the API's store errors).
const DEFAULT_RETRY_AFTER_SECONDS: u32 = 5;

/// Why a request cannot be served now: every `503` of this service names one of these, which
/// decides its `code`, its message and its `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    /// The writer's queue is full (`server.queueCapacity`).
    QueueFull,
    /// Too many request bytes in flight (`server.inFlightBytes`).
    InFlightBytes,
    /// The store cannot commit.
    Store,
    /// The service is shutting down.
    Stopped,
    /// The OIDC issuer's signing keys cannot be fetched.
    AuthKeys,
    /// No answer within `server.requestTimeout`.
    RequestTimeout,
    /// Readiness: draining after SIGTERM.
    Draining,
    /// Readiness: the store is not writable.
    StoreNotWritable,
    /// A standby replica: another replica holds the shard's writer lease.
    Standby,
    /// This replica lost its writer lease (it stops writing and stands by).
    LeaseLost,
    /// Liveness: a sync of the store failed; only a restart recovers.
    MustRestart,
}

impl Unavailable {
    /// The stable `code` (also the metric label).
    pub fn code(self) -> &'static str {
        match self {
            Unavailable::QueueFull | Unavailable::InFlightBytes => "overloaded",
            Unavailable::Store => "store",
            Unavailable::Stopped => "stopped",
            Unavailable::AuthKeys => "auth_unavailable",
            Unavailable::RequestTimeout => "request_timeout",
            Unavailable::Draining => "draining",
            Unavailable::StoreNotWritable => "store_not_writable",
            Unavailable::Standby => "standby",
            Unavailable::LeaseLost => "lease_lost",
            Unavailable::MustRestart => "must_restart",
        }
    }

    fn message(self) -> &'static str {
        match self {
            Unavailable::QueueFull => "event queue is full; retry later",
            Unavailable::InFlightBytes => "too much request data in flight; retry later",
            Unavailable::Store => "store cannot commit; retry later",
            Unavailable::Stopped => "shutting down; retry later",
            Unavailable::AuthKeys => "the issuer's signing keys cannot be fetched now; retry later",
            Unavailable::RequestTimeout => "the request was not answered in time; retry later",
            Unavailable::Draining => "draining",
            Unavailable::StoreNotWritable => "store not writable",
            Unavailable::Standby => "standby: another replica is the writer of this shard",
            Unavailable::LeaseLost => {
                "this replica lost the writer lease to another replica and is standing by"
            }
            Unavailable::MustRestart => {
                "a sync of the store failed: restart to load what is on disk"
            }
        }
    }

    /// Seconds the caller should wait: short for momentary pressure, longer for the store.
    fn retry_after(self) -> u32 {
        match self {
            Unavailable::QueueFull | Unavailable::InFlightBytes => 1,
            Unavailable::Stopped
            | Unavailable::Draining
            | Unavailable::Standby
            | Unavailable::LeaseLost => 2,
            Unavailable::Store
            | Unavailable::MustRestart
            | Unavailable::AuthKeys
            | Unavailable::RequestTimeout
            | Unavailable::StoreNotWritable => 5,
        }
    }
}

/// The `code` of an error answer, in its extensions, so one middleware counts every error of
/// `POST /` whichever layer answered it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ErrorCode(pub(crate) &'static str);

impl ApiError {
    /// An error answer. A `503` gets a `Retry-After` of a few seconds; [`ApiError::unavailable_for`]
    /// names the reason and the wait.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: (status == StatusCode::SERVICE_UNAVAILABLE)
                .then_some(DEFAULT_RETRY_AFTER_SECONDS),
            close: false,
        }
    }

    /// The `503` for `reason`.
    pub(crate) fn unavailable_for(reason: Unavailable) -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: reason.code(),
            message: reason.message().to_string(),
            retry_after: Some(reason.retry_after()),
            close: false,
        }
    }

    pub(crate) fn bad_request(error: &decode::Error) -> ApiError {
        // Decode errors can quote input (a key, a value); keep the body well under the 768
        // bytes Knative copies into the dead-letter event.
        ApiError::new(
            StatusCode::BAD_REQUEST,
            error.kind(),
            drift_core::decode::cloudevent::short(&error.to_string()),
        )
    }

    pub(crate) fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("request body exceeds the limit of {limit} bytes (server.bodyLimitBytes)"),
        )
    }

    pub(crate) fn body_too_slow() -> ApiError {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "body_too_slow",
            "request body arrived slower than the minimum rate (server.bodyReadTimeout, \
             server.bodyMinBytesPerSecond)",
        )
    }

    /// Its HTTP status.
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    /// Its message.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// The same answer with another message.
    pub(crate) fn with_message(mut self, message: String) -> ApiError {
        self.message = message;
        self
    }

    /// The same answer, and the connection is closed after it.
    pub(crate) fn closing(mut self) -> ApiError {
        self.close = true;
        self
    }

    pub(crate) fn unavailable(error: &pipeline::Error) -> ApiError {
        ApiError::unavailable_for(match error {
            pipeline::Error::Overloaded => Unavailable::QueueFull,
            pipeline::Error::Store(_) => Unavailable::Store,
            pipeline::Error::Stopped => Unavailable::Stopped,
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"code": self.code, "message": self.message}).to_string();
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.close {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response.extensions_mut().insert(ErrorCode(self.code));
        response
    }
}

/// The net under "every `413` and `503` is an `ApiError`": an answer with one of these statuses
/// that some layer made without `ApiError` (axum's form and JSON extractors answer a body over
/// their default limit with a plain-text `413`) is replaced by the same JSON as ours.
pub(crate) async fn uniform_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if response.extensions().get::<ErrorCode>().is_some() {
        return response;
    }
    // The dashboard's own HTML pages (its 413 and 404 included) are answers, not defaults.
    let html = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/html"));
    if html {
        return response;
    }
    match response.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            "request body exceeds the limit of this endpoint",
        )
        .into_response(),
        StatusCode::SERVICE_UNAVAILABLE => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "service unavailable; retry later",
        )
        .into_response(),
        // The router's own answers for an unknown path or method have no body.
        StatusCode::NOT_FOUND if is_empty(&response) => {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint").into_response()
        }
        StatusCode::METHOD_NOT_ALLOWED if is_empty(&response) => {
            let mut answer = ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this endpoint does not take that method",
            )
            .into_response();
            if let Some(allow) = response.headers().get(axum::http::header::ALLOW) {
                answer
                    .headers_mut()
                    .insert(axum::http::header::ALLOW, allow.clone());
            }
            answer
        }
        _ => response,
    }
}

/// True when a response has no body.
fn is_empty(response: &Response) -> bool {
    use http_body::Body as _;
    response.body().size_hint().exact() == Some(0)
}
