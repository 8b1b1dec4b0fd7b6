//! Ingest: the HTTP edge. Only this module knows axum and status codes.
//!
//! `POST /` takes CloudEvents (binary, structured, batch) and answers exactly as Knative's Broker
//! expects of a sink (`knative/eventing` `pkg/broker/filter/filter_handler.go`):
//!
//! | situation | answer |
//! |---|---|
//! | accepted and committed, or a type this service ignores | `202`, empty body, no `ce-*` headers |
//! | not a valid CloudEvent | `400` JSON `{code, message}` (not retried; the first 768 bytes reach the dead-letter event) |
//! | body arrives slower than the minimum rate | `408` JSON, connection closed (retried) |
//! | body over the limit, declared or counted | `413` JSON (not retried) |
//! | an event of a cluster this shard does not own (`shard.clusters`); a batch holding one, whole | `421` JSON naming the shard (not retried: dead-lettered) |
//! | queue full, request bytes in flight, store cannot commit, shutting down, request timeout, a standby replica | `503` JSON with `Retry-After` (retried) |
//!
//! Every error answer, of `POST /` and of every other route, is an [`ApiError`]: JSON
//! `{code, message}`, and every `503` carries `Retry-After` (its reasons are [`Unavailable`]).
//! The exception is a request head hyper cannot parse (a raw `<` in the target): hyper answers
//! it before any route sees it, `400` with an empty body, and offers no hook to change that body.
//! The server itself (connections, their timeouts and their cap) is [`server`].
//!
//! Architecture invariant: a `2xx` is sent only after the pipeline reports the events committed.
//! A `2xx` never carries a body: the Broker would treat a CloudEvent body as a reply and any other
//! body as a `502`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::error::{uniform_errors, ErrorCode};
pub use crate::error::{ApiError, Unavailable};
use crate::metrics::{KindLabel, Metrics};
use crate::pipeline::{self, EventResult, Pipeline};
use drift_core::config::ShardConfig;
use drift_core::decode::{self, ClusterNames, Decoded};

pub mod admission;
pub mod auth;
pub mod server;

pub use server::{serve, ConnectionLimits};

/// The writer's routes, for the wiring that swaps them in ([`switch`]): the router, and `POST /`
/// on its own, which the switch serves without going through the router. Built together by
/// [`router`] only, so the two cannot disagree.
#[derive(Clone)]
pub struct Routes {
    router: Router,
    ingest: Ingest,
}

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
    /// How fast a request body must arrive.
    pub body_pace: admission::BodyPace,
    /// The clusters this replica's shard owns; events of others are refused with `421`.
    pub shard: Arc<ShardConfig>,
    /// Whether this replica still holds its writer lease: once not, readiness false and events
    /// `503`, until the standby's answers take over.
    pub lease: Arc<LeaseGate>,
}

/// Whether this replica may still act as the writer of a shared store: not once its lease was
/// found lost, nor once the time its last renewal allows has run out. The second is read from
/// the monotonic clock at each request, so a replica resumed after a pause (SIGSTOP, a frozen
/// node) refuses events and turns unready on its first request, not at the lease keeper's next
/// look (the keeper then stops the writer role). Without a lease (one pod's SQLite file) the
/// time never runs out.
#[derive(Debug)]
pub struct LeaseGate {
    lost: AtomicBool,
    base: std::time::Instant,
    /// Milliseconds after `base` until which the lease holds; `u64::MAX` without a lease.
    valid_until_ms: std::sync::atomic::AtomicU64,
}

impl Default for LeaseGate {
    fn default() -> LeaseGate {
        LeaseGate {
            lost: AtomicBool::new(false),
            base: std::time::Instant::now(),
            valid_until_ms: std::sync::atomic::AtomicU64::new(u64::MAX),
        }
    }
}

impl LeaseGate {
    /// Marks the lease lost (`true`) or the replica's state as its own again (`false`).
    pub(crate) fn set_lost(&self, lost: bool) {
        self.lost.store(lost, Ordering::SeqCst);
    }

    /// The lease holds until `deadline` (monotonic): the last renewal's, or the acquisition's.
    pub(crate) fn hold_until(&self, deadline: std::time::Instant) {
        let millis = deadline.saturating_duration_since(self.base).as_millis();
        self.valid_until_ms.store(
            u64::try_from(millis).unwrap_or(u64::MAX - 1),
            Ordering::SeqCst,
        );
    }

    /// True once the lease was found lost or its time ran out.
    pub(crate) fn is_lost(&self) -> bool {
        if self.lost.load(Ordering::SeqCst) {
            return true;
        }
        let until = self.valid_until_ms.load(Ordering::SeqCst);
        until != u64::MAX
            && u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX) >= until
    }
}

/// The routes: `POST /` plus health and metrics, merged with `routes` (the API and dashboard),
/// every route under one request timeout.
pub fn router(state: AppState, routes: Router, request_timeout: Duration) -> Routes {
    // Shared behind one `Arc`: axum clones the state for every request, and a clone of the
    // fields themselves (a channel sender, a dozen `Arc`s) was a visible share of a request.
    let state = Arc::new(state);
    let ingest = Ingest {
        admission: admission::Admission::new(
            state.body_limit,
            state.in_flight_limit,
            state.body_pace,
        ),
        state: Arc::clone(&state),
        request_timeout,
    };
    let others = Router::new()
        .route("/healthz", get(writer_healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
        .merge(routes)
        .layer(from_fn_with_state(request_timeout, time_limit));
    // Whatever `POST /` needs belongs in `Ingest::serve`: the switch (the service's and every
    // test's way in) sends `POST /` there without this router, so this route's handler is not
    // reached; it is here so that other methods on `/` get the router's JSON `405` with
    // `Allow: POST`. Those are not counted as CloudEvents requests (`ingest_responses`).
    let served = ingest.clone();
    let router = Router::new()
        .route(
            "/",
            post(move |request: Request| async move { served.serve(request).await }),
        )
        .merge(others)
        .layer(axum::middleware::from_fn(uniform_errors));
    Routes { router, ingest }
}

/// `POST /`, its steps in one future, outermost first: every answer counted (by status, and
/// errors by code, whichever step answered), the request timeout, admission (the body limit,
/// the bytes in flight, the body's pace), then the request itself. Not three `from_fn` layers:
/// each cloned a boxed service and boxed a future per request, a share of every event's CPU
/// (BENCHMARKS.md, issue 28). Its answers are [`ApiError`]s or an empty `202`, which
/// `uniform_errors` would leave as they are, so it is not needed here.
#[derive(Clone)]
pub struct Ingest {
    state: Arc<AppState>,
    admission: admission::Admission,
    request_timeout: Duration,
}

impl Ingest {
    /// Answers one `POST /`.
    pub async fn serve(&self, request: Request) -> Response {
        let admitted = admission::admit(&self.admission, request, |request| async move {
            match handle(&self.state, request).await {
                Ok(()) => StatusCode::ACCEPTED.into_response(),
                Err(error) => error.into_response(),
            }
        });
        let response = match tokio::time::timeout(self.request_timeout, admitted).await {
            Ok(response) => response,
            Err(_) => ApiError::unavailable_for(Unavailable::RequestTimeout).into_response(),
        };
        count_answer(&self.state.metrics, &response);
        response
    }
}

/// Answers `503` (`request_timeout`) when the request takes longer than `limit`.
async fn time_limit(State(limit): State<Duration>, request: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::unavailable_for(Unavailable::RequestTimeout).into_response(),
    }
}

/// Counts an answer of `POST /` by status, and an error by its code.
fn count_answer(metrics: &Metrics, response: &Response) {
    if let Some(ErrorCode(code)) = response.extensions().get::<ErrorCode>() {
        metrics
            .ingest_errors
            .get_or_create(&KindLabel::new(code))
            .inc();
    }
    metrics.record_response(response.status().as_u16());
}

async fn handle(state: &AppState, request: Request) -> Result<(), ApiError> {
    if state.draining.load(Ordering::SeqCst) {
        return Err(ApiError::unavailable(&pipeline::Error::Stopped));
    }
    if state.lease.is_lost() {
        // Fenced: its commits would fail; the Broker retries on the replica that took over.
        return Err(ApiError::unavailable_for(Unavailable::LeaseLost));
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
            auth::AuthError::Unavailable(_) => ApiError::unavailable_for(Unavailable::AuthKeys),
        });
    }
    let (parts, body) = request.into_parts();
    let bytes = read_body(body, state.body_limit).await?;
    let decoded =
        decode::decode_request(&parts.headers, &bytes, &state.clusters).map_err(|error| {
            tracing::warn!(
                message = "Rejected an invalid CloudEvent.",
                error = %drift_core::decode::cloudevent::short(&error.to_string()),
                code = error.kind()
            );
            ApiError::bad_request(&error)
        })?;
    check_shard(state, &decoded)?;
    // Metrics and the log line need a few names once the writer has answered; the events
    // themselves move to the writer (copying whole objects would cost about what decoding did).
    // The names for the log line are copied only when it is written (debug).
    let named = tracing::enabled!(tracing::Level::DEBUG);
    let summaries: Vec<EventSummary> = decoded
        .iter()
        .map(|event| EventSummary::of(event, named))
        .collect();
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

/// Refuses the whole request when one of its events belongs to a cluster another shard owns:
/// `421`, which the Broker does not retry (the event goes to the dead-letter sink, visibly),
/// instead of applying it here (two shards would judge one object) or dropping it.
///
/// A batch holding one such event is refused whole, its owned events with it: one HTTP answer
/// has one status, so it cannot take some events and refuse others, and taking the owned ones
/// with a `2xx` would lose the foreign one silently. The Broker never sends batches (each Trigger
/// delivery is one event, filtered by the shard's cluster prefix); a direct sender that batches
/// must group its events by shard. The refused events are counted by cause in
/// `shard_events_total{outcome}`: `refused` (their cluster is another shard's) and
/// `refused_with_batch` (owned here, refused with the batch that held a foreign event).
fn check_shard(state: &AppState, decoded: &[Decoded]) -> Result<(), ApiError> {
    let shard = &state.shard;
    let mut refused: Option<(usize, String)> = None;
    let (mut owned, mut foreign) = (0u64, 0u64);
    for (index, event) in decoded.iter().enumerate() {
        if let Decoded::ApiServer(event) = event {
            if shard.owns(&event.cluster) {
                owned += 1;
            } else {
                foreign += 1;
                if refused.is_none() {
                    refused = Some((index, event.cluster.clone()));
                }
            }
        }
    }
    let count = |outcome: &str, by: u64| {
        if by > 0 {
            state
                .metrics
                .shard_events
                .get_or_create(&crate::metrics::ShardOutcomeLabel {
                    shard: shard.name.clone(),
                    outcome: outcome.to_string(),
                })
                .inc_by(by);
        }
    };
    let Some((index, cluster)) = refused else {
        count("owned", owned);
        return Ok(());
    };
    count("refused", foreign);
    count("refused_with_batch", owned);
    let cluster = drift_core::decode::cloudevent::short(&cluster);
    tracing::warn!(
        message = "Refused an event of a cluster this shard does not own; check the Triggers' cluster filters.",
        cluster = %cluster,
        shard = %shard.name,
        refused_with_batch = owned,
    );
    let whole = if decoded.len() > 1 {
        format!(
            "batch[{index}]: the whole batch of {} events is refused ({owned} of them owned here): send each shard's events in their own request; ",
            decoded.len()
        )
    } else {
        String::new()
    };
    Err(ApiError::new(
        StatusCode::MISDIRECTED_REQUEST,
        "cluster_not_in_shard",
        format!(
            "{whole}cluster {cluster:?} is not owned by shard {:?} (shard.clusters: {}): the Trigger of the shard that owns it should receive this event",
            shard.name,
            shard.clusters.join(", ")
        ),
    ))
}

/// What is kept of an event for metrics and logs after it went to the writer.
struct EventSummary {
    action: &'static str,
    mode: &'static str,
    /// The names the debug log line shows, when it is written.
    names: Option<Names>,
}

/// An event's names for the debug log line.
struct Names {
    id: String,
    ce_type: String,
    /// Cluster, kind, namespace and name of an ApiServerSource event.
    object: Option<[String; 4]>,
}

impl EventSummary {
    fn of(event: &Decoded, named: bool) -> EventSummary {
        let (action, mode) = match event {
            Decoded::ApiServer(event) => (event.action.as_str(), event.mode.as_str()),
            Decoded::Ignored { .. } => ("other", "none"),
        };
        EventSummary {
            action,
            mode,
            names: named.then(|| Names::of(event)),
        }
    }

    fn log(&self, result: EventResult) {
        let Some(names) = &self.names else {
            return;
        };
        match &names.object {
            Some([cluster, kind, namespace, name]) => tracing::debug!(
                message = "Event processed.",
                ce_id = %names.id,
                ce_type = %names.ce_type,
                cluster = %cluster,
                kind = %kind,
                namespace = %namespace,
                name = %name,
                outcome = result.as_str(),
            ),
            None => tracing::debug!(
                message = "Ignored a CloudEvent of an unhandled type.",
                ce_id = %names.id,
                ce_type = %names.ce_type,
            ),
        }
    }
}

impl Names {
    fn of(event: &Decoded) -> Names {
        match event {
            Decoded::ApiServer(event) => Names {
                id: event.id.clone(),
                ce_type: event.ce_type.clone(),
                object: Some([
                    event.cluster.clone(),
                    event.kind.clone(),
                    event.namespace.clone(),
                    event.name.clone(),
                ]),
            },
            Decoded::Ignored { id, ce_type, .. } => Names {
                id: id.clone(),
                ce_type: ce_type.clone(),
                object: None,
            },
        }
    }
}

async fn read_body(body: Body, limit: usize) -> Result<axum::body::Bytes, ApiError> {
    match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => Ok(bytes),
        Err(error) => {
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&error);
            while let Some(current) = source {
                if let Some(stopped) = current.downcast_ref::<admission::BodyError>() {
                    return Err(stopped.answer());
                }
                if current.is::<http_body_util::LengthLimitError>() {
                    return Err(ApiError::too_large(limit).closing());
                }
                source = current.source();
            }
            // A body that stops mid-way means the sender went away; it will not read this
            // answer, but the status keeps the metrics honest.
            Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "body_read",
                format!("could not read request body: {error}"),
            )
            .closing())
        }
    }
}

async fn healthz() -> impl IntoResponse {
    (StatusCode::OK, "ok")
}

/// The writer's liveness: failed once a sync of the store failed (`Health::must_restart`).
async fn writer_healthz(State(state): State<Arc<AppState>>) -> Response {
    if state.pipeline.health().must_restart.load(Ordering::SeqCst) {
        return ApiError::unavailable_for(Unavailable::MustRestart).into_response();
    }
    (StatusCode::OK, "ok").into_response()
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let store_ok = state
        .pipeline
        .health()
        .store_writable
        .load(Ordering::SeqCst);
    let draining = state.draining.load(Ordering::SeqCst);
    if state.lease.is_lost() {
        return ApiError::unavailable_for(Unavailable::LeaseLost).into_response();
    }
    if store_ok && !draining {
        // Ready while the live objects are judged again (after a start or a reload): events are
        // accepted and judged meanwhile (the re-judge runs in slices between rounds), and in a
        // Deployment a 503 here would take the writer out of its Service and refuse them all.
        // The body says what it is doing until it is done.
        let mut body = serde_json::json!({"status": "ready"});
        if let Some(rejudging) = state.pipeline.health().rejudging() {
            body["rejudging"] = serde_json::json!(rejudging);
        }
        (StatusCode::OK, axum::Json(body)).into_response()
    } else if draining {
        ApiError::unavailable_for(Unavailable::Draining).into_response()
    } else {
        ApiError::unavailable_for(Unavailable::StoreNotWritable).into_response()
    }
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    render_metrics(&state.metrics)
}

fn render_metrics(metrics: &Metrics) -> Response {
    let mut response = metrics.render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}

/// What a replica answers before it holds its shard's writer lease (a standby), on the same
/// listener as the writer's routes: alive (`/healthz`), not ready (`/readyz` says who the writer
/// is, so the Kubernetes Service routes the Trigger's deliveries to the writer), its metrics,
/// and `503` with `Retry-After` for everything else (an event that reaches a standby anyway is
/// retried by the Broker).
#[derive(Clone)]
pub struct Standby {
    /// Why this replica is not the writer, e.g. "shard default: the writer is pod-0/7/ab12cd34".
    pub reason: Arc<std::sync::RwLock<String>>,
    /// The replica's metrics (the lease gauges tell a standby from a writer).
    pub metrics: Arc<Metrics>,
}

impl Standby {
    fn answer(&self) -> Response {
        let reason = self
            .reason
            .read()
            .map(|reason| reason.clone())
            .unwrap_or_default();
        let error = ApiError::unavailable_for(Unavailable::Standby);
        if reason.is_empty() {
            error.into_response()
        } else {
            error
                .with_message(format!("standby: {reason}"))
                .into_response()
        }
    }
}

/// What a replica that may be a standby answers with: the standby's answers while `writer` is
/// `None`, the writer's routes while it is set (from when this replica holds the lease and loaded
/// its state until it stops or loses the lease), on the same connections.
pub fn switch(standby: Standby, writer: Arc<std::sync::RwLock<Option<Routes>>>) -> Switch {
    let standby_routes = Router::new()
        .route("/healthz", get(healthz))
        .route(
            "/metrics",
            get({
                let metrics = Arc::clone(&standby.metrics);
                move || async move { render_metrics(&metrics) }
            }),
        )
        .fallback({
            let standby = standby.clone();
            move || async move { standby.answer() }
        });
    Switch {
        standby_routes,
        writer,
    }
}

/// The service every connection's requests go to ([`switch`]). Called as a plain function by
/// the server, not as a router in front of the routes: one dispatch and boxed future fewer per
/// request, though no gain was shown for that alone (BENCHMARKS.md, issue 28, seventeenth
/// round); `POST /` skipping the router's layers is what was.
#[derive(Clone)]
pub struct Switch {
    standby_routes: Router,
    writer: Arc<std::sync::RwLock<Option<Routes>>>,
}

impl Switch {
    /// Answers one request.
    pub async fn answer(&self, request: Request) -> Response {
        use tower::ServiceExt as _;
        // The event path, the busiest route by far, without the router in between.
        let is_ingest = request.method() == axum::http::Method::POST && request.uri().path() == "/";
        let (ingest, router) = match self.writer.read().as_deref() {
            Ok(Some(routes)) if is_ingest => (Some(routes.ingest.clone()), None),
            Ok(Some(routes)) => (None, Some(routes.router.clone())),
            // No writer (or a writer that panicked while swapping): the standby's answers.
            _ => (None, None),
        };
        if let Some(ingest) = ingest {
            return ingest.serve(request).await;
        }
        let router = router.unwrap_or_else(|| self.standby_routes.clone());
        match router.oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }

    /// As a router (for tests that send requests to the service without a connection).
    #[doc(hidden)]
    pub fn into_router(self) -> Router {
        Router::new().fallback_service(tower::service_fn(move |request: Request| {
            let switch = self.clone();
            async move { Ok::<_, std::convert::Infallible>(switch.answer(request).await) }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::LeaseGate;
    use std::sync::{Arc, RwLock};
    use std::time::{Duration, Instant};

    /// Poisons `lock`: a thread panics while it holds the write guard.
    fn poison<T: Send + Sync + 'static>(lock: &Arc<RwLock<T>>) {
        let held = Arc::clone(lock);
        let joined = std::thread::spawn(move || {
            let _guard = held.write().expect("not poisoned yet");
            panic!("poisoning the lock on purpose");
        })
        .join();
        assert!(joined.is_err(), "the thread panicked");
        assert!(lock.is_poisoned());
    }

    async fn answer(switch: &super::Switch, method: &str, path: &str) -> (u16, String) {
        use http_body_util::BodyExt;
        let request = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(axum::body::Body::from("{}"))
            .expect("request");
        let response = switch.answer(request).await;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// A writer that panicked while swapping its routes in or out leaves the switch's lock
    /// poisoned: the replica then answers as a standby (`503`, which the Broker retries), never
    /// with a panic of its own, and the standby's reason, poisoned too, is left out of the
    /// answer rather than failing it. The lock holds no routes here (they need a whole app
    /// state), so this cannot tell a poisoned lock refused from one read through to `None`.
    #[tokio::test]
    async fn a_poisoned_switch_answers_as_a_standby() {
        let reason = Arc::new(RwLock::new("the writer is pod-1".to_string()));
        let metrics = Arc::new(crate::metrics::Metrics::new());
        let standby = super::Standby {
            reason: Arc::clone(&reason),
            metrics,
        };
        let writer: Arc<RwLock<Option<super::Routes>>> = Arc::new(RwLock::new(None));
        let switch = super::switch(standby, Arc::clone(&writer));

        let (status, body) = answer(&switch, "POST", "/").await;
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("the writer is pod-1"), "{body}");

        poison(&writer);
        let (status, body) = answer(&switch, "POST", "/").await;
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("\"standby\""), "{body}");
        let (status, _) = answer(&switch, "GET", "/healthz").await;
        assert_eq!(status, 200, "the standby's health answers");

        poison(&reason);
        let (status, body) = answer(&switch, "POST", "/").await;
        assert_eq!(status, 503, "{body}");
        assert!(!body.contains("pod-1"), "{body}");
    }

    #[test]
    fn a_lease_gate_closes_when_lost_or_when_its_time_runs_out() {
        let gate = LeaseGate::default();
        assert!(!gate.is_lost(), "without a lease its time never runs out");
        gate.hold_until(Instant::now() + Duration::from_secs(3600));
        assert!(!gate.is_lost());
        gate.set_lost(true);
        assert!(gate.is_lost());
        gate.set_lost(false);
        assert!(!gate.is_lost());
        gate.hold_until(Instant::now());
        assert!(
            gate.is_lost(),
            "a deadline that passed closes it before the keeper looks"
        );
        gate.hold_until(Instant::now() + Duration::from_secs(3600));
        assert!(!gate.is_lost(), "a renewal opens it again");
    }
}
