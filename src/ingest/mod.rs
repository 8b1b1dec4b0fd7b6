//! Ingest: the HTTP edge. Only this module knows axum and status codes.
//!
//! `POST /` takes CloudEvents (binary, structured, batch) and answers exactly as Knative's Broker
//! expects of a sink (`knative/eventing` `pkg/broker/filter/filter_handler.go`):
//!
//! | situation | answer |
//! |---|---|
//! | accepted and committed, or a type this service ignores | `202`, empty body, no `ce-*` headers |
//! | not a valid CloudEvent | `400` JSON `{code, message}` (not retried; the first 768 bytes reach the dead-letter event) |
//! | body over the limit | `413` (not retried) |
//! | queue full, store cannot commit, shutting down | `503` with `Retry-After` (retried) |
//!
//! Architecture invariant: a `2xx` is sent only after the pipeline reports the events committed.
//! A `2xx` never carries a body: the Broker would treat a CloudEvent body as a reply and any other
//! body as a `502`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use crate::decode::{self, ClusterNames, Decoded};
use crate::metrics::{CodeLabel, KindLabel, Metrics};
use crate::pipeline::{self, EventResult, Pipeline};

pub mod admission;
pub mod auth;

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub struct AppState {
    /// Authentication of `POST /`.
    pub ingest_auth: auth::IngestAuth,
    /// The single writer.
    pub pipeline: Pipeline,
    /// Cluster naming.
    pub clusters: Arc<ClusterNames>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Set on SIGTERM: readiness turns false, new events get `503`.
    pub draining: Arc<AtomicBool>,
    /// Body limit in bytes.
    pub body_limit: usize,
    /// Request bytes in flight at once (admission budget).
    pub in_flight_limit: usize,
}

/// An error answer: stable `code`, short `message`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    retry_after: Option<u32>,
}

impl ApiError {
    /// An error answer.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    fn bad_request(error: &decode::Error) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code: error.kind(),
            // Decode errors can quote input (a key, a value); keep the body well under the 768
            // bytes Knative copies into the dead-letter event.
            message: crate::decode::cloudevent::short(&error.to_string()),
            retry_after: None,
        }
    }

    fn too_large(limit: usize) -> ApiError {
        ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: "body_too_large",
            message: format!(
                "request body exceeds the limit of {limit} bytes (server.bodyLimitBytes)"
            ),
            retry_after: None,
        }
    }

    pub(crate) fn unavailable(error: &pipeline::Error) -> ApiError {
        let (message, retry_after) = match error {
            pipeline::Error::Overloaded => ("event queue is full; retry later", 1),
            pipeline::Error::Store(_) => ("store cannot commit; retry later", 5),
            pipeline::Error::Stopped => ("shutting down; retry later", 2),
        };
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: error.kind(),
            message: message.to_string(),
            retry_after: Some(retry_after),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"code": self.code, "message": self.message}).to_string();
        let mut response = (self.status, body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// Serves `router` on `listener` until `shutdown` completes, then lets in-flight requests finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

/// The router: `POST /` plus health and metrics, merged with `routes` (the API and dashboard),
/// every route under one request timeout.
pub fn router(state: AppState, routes: Router, request_timeout: std::time::Duration) -> Router {
    let admission = admission::Admission::new(
        state.body_limit,
        state.in_flight_limit,
        Arc::clone(&state.metrics),
    );
    let ingest = Router::new()
        .route("/", post(receive))
        .layer(RequestBodyLimitLayer::new(state.body_limit))
        .layer(axum::middleware::from_fn_with_state(
            admission,
            admission::admit,
        ));
    Router::new()
        .merge(ingest)
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
        .merge(routes)
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            request_timeout,
        ))
}

async fn receive(State(state): State<AppState>, request: Request) -> Response {
    let response = match handle(&state, request).await {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(error) => {
            state
                .metrics
                .ingest_errors
                .get_or_create(&KindLabel::new(error.code))
                .inc();
            error.into_response()
        }
    };
    state
        .metrics
        .responses
        .get_or_create(&CodeLabel {
            code: response.status().as_u16().to_string(),
        })
        .inc();
    response
}

async fn handle(state: &AppState, request: Request) -> Result<(), ApiError> {
    if state.draining.load(Ordering::SeqCst) {
        return Err(ApiError::unavailable(&pipeline::Error::Stopped));
    }
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    if let Err(error) = state.ingest_auth.check(authorization).await {
        tracing::warn!(message = "Refused an unauthenticated CloudEvents request.", %error);
        return Err(match error {
            auth::AuthError::Unauthenticated(message) => {
                ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
            }
            auth::AuthError::Forbidden(message) => {
                ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
            }
            auth::AuthError::Unavailable(message) => {
                let mut error =
                    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "auth_unavailable", message);
                error.retry_after = Some(5);
                error
            }
        });
    }
    let (parts, body) = request.into_parts();
    let bytes = read_body(body, state.body_limit).await?;
    let decoded =
        decode::decode_request(&parts.headers, &bytes, &state.clusters).map_err(|error| {
            tracing::warn!(
                message = "Rejected an invalid CloudEvent.",
                error = %crate::decode::cloudevent::short(&error.to_string()),
                code = error.kind()
            );
            ApiError::bad_request(&error)
        })?;
    // Metrics and the log line need a few names once the writer has answered; the events
    // themselves move to the writer (copying whole objects would cost about what decoding did).
    let summaries: Vec<EventSummary> = decoded.iter().map(EventSummary::of).collect();
    let receiver = state
        .pipeline
        .submit(decoded)
        .map_err(|error| ApiError::unavailable(&error))?;
    let results = match receiver.await {
        Ok(Ok(results)) => results,
        Ok(Err(error)) => return Err(ApiError::unavailable(&error)),
        Err(_) => return Err(ApiError::unavailable(&pipeline::Error::Stopped)),
    };
    for (summary, result) in summaries.iter().zip(results) {
        state.metrics.record_event(result.as_str());
        state.metrics.record_received(summary.action, summary.mode);
        summary.log(result);
    }
    Ok(())
}

/// What is kept of an event for metrics and logs after it went to the writer.
struct EventSummary {
    action: &'static str,
    mode: &'static str,
    id: String,
    ce_type: String,
    /// Cluster, kind, namespace and name of an ApiServerSource event.
    object: Option<[String; 4]>,
}

impl EventSummary {
    fn of(event: &Decoded) -> EventSummary {
        match event {
            Decoded::ApiServer(event) => EventSummary {
                action: event.action.as_str(),
                mode: match event.mode {
                    crate::decode::Mode::Resource => "resource",
                    crate::decode::Mode::Reference => "reference",
                },
                id: event.id.clone(),
                ce_type: event.ce_type.clone(),
                object: Some([
                    event.cluster.clone(),
                    event.kind.clone(),
                    event.namespace.clone(),
                    event.name.clone(),
                ]),
            },
            Decoded::Ignored { id, ce_type, .. } => EventSummary {
                action: "other",
                mode: "none",
                id: id.clone(),
                ce_type: ce_type.clone(),
                object: None,
            },
        }
    }

    fn log(&self, result: EventResult) {
        match &self.object {
            Some([cluster, kind, namespace, name]) => tracing::debug!(
                message = "Event processed.",
                ce_id = %self.id,
                ce_type = %self.ce_type,
                cluster = %cluster,
                kind = %kind,
                namespace = %namespace,
                name = %name,
                outcome = result.as_str(),
            ),
            None => tracing::debug!(
                message = "Ignored a CloudEvent of an unhandled type.",
                ce_id = %self.id,
                ce_type = %self.ce_type,
            ),
        }
    }
}

async fn read_body(body: Body, limit: usize) -> Result<axum::body::Bytes, ApiError> {
    match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => Ok(bytes),
        Err(error) => {
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&error);
            while let Some(current) = source {
                if current.is::<http_body_util::LengthLimitError>() {
                    return Err(ApiError::too_large(limit));
                }
                source = current.source();
            }
            // A body that stops mid-way means the sender went away; it will not read this
            // answer, but the status keeps the metrics honest.
            Err(ApiError {
                status: StatusCode::BAD_REQUEST,
                code: "body_read",
                message: format!("could not read request body: {error}"),
                retry_after: None,
            })
        }
    }
}

async fn healthz() -> impl IntoResponse {
    (StatusCode::OK, "ok")
}

async fn readyz(State(state): State<AppState>) -> Response {
    let store_ok = state
        .pipeline
        .health()
        .store_writable
        .load(Ordering::SeqCst);
    let draining = state.draining.load(Ordering::SeqCst);
    if store_ok && !draining {
        (StatusCode::OK, "ready").into_response()
    } else {
        let reason = if draining {
            "draining"
        } else {
            "store not writable"
        };
        (StatusCode::SERVICE_UNAVAILABLE, reason).into_response()
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    let mut response = state.metrics.render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}
