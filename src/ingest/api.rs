//! The drift API (`/api/v1`): drifts with their history and deliveries, dead deliveries,
//! silences, and the report. JSON in and out; times are RFC 3339. Protected by a bearer token
//! when `api.token` is set (the CloudEvents ingest keeps its own auth).

use std::sync::Arc;

use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{ApiError, AppState};
use crate::classify::classes;
use crate::config::SilenceConfig;
use crate::model::SEVERITIES;
use crate::model::{Drift, Millis};
use crate::pipeline::{SilenceOutcome, SilenceRequest};
use crate::store::OutboxState;
use crate::store::{AuditRead, DriftFilter};
use crate::time::format_time;
use crate::wire::drift::{DriftView, EvidenceView};

/// The `/api/v1` routes.
pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/drifts", get(list_drifts))
        .route("/drifts/{id}", get(get_drift))
        .route("/deliveries", get(list_deliveries))
        .route("/silences", get(list_silences).post(create_silence))
        .route("/silences/{id}", delete(delete_silence))
        .route("/report", get(report))
        .layer(middleware::from_fn_with_state(state, require_token))
}

/// Constant-time comparison, so a token cannot be guessed byte by byte from timings.
pub fn same_secret(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    let mut difference = a.len() ^ b.len();
    for index in 0..a.len().max(b.len()) {
        difference |=
            usize::from(a.get(index).copied().unwrap_or(0) ^ b.get(index).copied().unwrap_or(0));
    }
    difference == 0
}

/// The bearer token of a request, if any.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

async fn require_token(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(expected) = &state.api_token {
        let ok =
            bearer(request.headers()).is_some_and(|given| same_secret(given, expected.expose()));
        if !ok {
            let mut response = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a valid bearer token is required",
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    next.run(request).await
}

/// The audit reader, or a `503` when the store has none (memory store in tests).
pub fn audit(state: &AppState) -> Result<Arc<dyn AuditRead>, ApiError> {
    state.audit.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no_audit_store",
            "the audit store is not available",
        )
    })
}

/// Runs a blocking store query off the async runtime.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, crate::store::Error> + Send + 'static,
) -> Result<T, ApiError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => {
            tracing::error!(message = "Audit query failed.", %error);
            Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store",
                "the store cannot answer now; retry later",
            ))
        }
        Err(_) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error",
        )),
    }
}

/// A drift as the API shows it (`wire::drift::DriftView`): the record with times as RFC 3339.
pub fn drift_view(drift: &Drift) -> Value {
    serde_json::to_value(DriftView::from(drift)).unwrap_or(Value::Null)
}

fn parse_time(field: &str, text: &str) -> Result<Millis, ApiError> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|time| time.timestamp_millis())
        .map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!("{field}: {text:?} is not an RFC 3339 time"),
            )
        })
}

/// Query of `GET /drifts`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct DriftQuery {
    /// pending, firing, resolved or open.
    pub state: Option<String>,
    /// Class id.
    pub class: Option<String>,
    /// Severity.
    pub severity: Option<String>,
    /// Cluster.
    pub cluster: Option<String>,
    /// Namespace.
    pub namespace: Option<String>,
    /// RFC 3339.
    pub since: Option<String>,
    /// Page size (default 100, at most 500).
    pub limit: Option<usize>,
    /// From the previous page's `nextCursor`.
    pub cursor: Option<String>,
}

/// Validates a drift query into a store filter.
pub fn filter(query: &DriftQuery) -> Result<DriftFilter, ApiError> {
    let invalid =
        |message: String| ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", message);
    if let Some(state) = &query.state {
        if !["pending", "firing", "resolved", "open"].contains(&state.as_str()) {
            return Err(invalid(format!(
                "state: {state:?} is not pending, firing, resolved or open"
            )));
        }
    }
    if let Some(class) = &query.class {
        if !classes::is_known(class) {
            return Err(invalid(format!("class: unknown drift class {class:?}")));
        }
    }
    if let Some(severity) = &query.severity {
        if !SEVERITIES.contains(&severity.as_str()) {
            return Err(invalid(format!(
                "severity: must be one of {}",
                SEVERITIES.join(", ")
            )));
        }
    }
    let cursor = match &query.cursor {
        None => None,
        Some(text) => {
            let (since, id) = text
                .split_once('.')
                .ok_or_else(|| invalid("cursor: malformed".to_string()))?;
            Some((
                since
                    .parse::<Millis>()
                    .map_err(|_| invalid("cursor: malformed".to_string()))?,
                id.to_string(),
            ))
        }
    };
    Ok(DriftFilter {
        state: query.state.clone(),
        class: query.class.clone(),
        severity: query.severity.clone(),
        cluster: query.cluster.clone(),
        namespace: query.namespace.clone(),
        since: query
            .since
            .as_deref()
            .map(|text| parse_time("since", text))
            .transpose()?,
        limit: query.limit.unwrap_or(100).clamp(1, 500),
        cursor,
    })
}

fn query_error(error: axum::extract::rejection::QueryRejection) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", error.body_text())
}

async fn list_drifts(
    State(state): State<AppState>,
    query: Result<Query<DriftQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) = query.map_err(query_error)?;
    let filter = filter(&query)?;
    let reader = audit(&state)?;
    let (drifts, next) = blocking(move || reader.drifts(&filter)).await?;
    Ok(Json(json!({
        "items": drifts.iter().map(drift_view).collect::<Vec<_>>(),
        "nextCursor": next.map(|(since, id)| format!("{since}.{id}")),
    })))
}

async fn get_drift(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let reader = audit(&state)?;
    let lookup = id.clone();
    let found = blocking(move || {
        let Some(drift) = reader.drift(&lookup)? else {
            return Ok(None);
        };
        Ok(Some((
            drift,
            reader.history(&lookup)?,
            reader.deliveries_of(&lookup)?,
        )))
    })
    .await?;
    let Some((drift, history, deliveries)) = found else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no drift {id:?}"),
        ));
    };
    let history: Vec<Value> = history
        .into_iter()
        .map(|entry| json!({"from": entry.from, "to": entry.to, "at": format_time(entry.at), "evidence": entry.evidence.as_ref().map(EvidenceView::from)}))
        .collect();
    Ok(Json(json!({
        "drift": drift_view(&drift),
        "history": history,
        "deliveries": deliveries.iter().map(delivery_view).collect::<Vec<_>>(),
    })))
}

fn delivery_view(delivery: &crate::store::audit::DeliveryView) -> Value {
    json!({
        "id": delivery.id,
        "channel": delivery.channel,
        "driftId": delivery.drift_id,
        "kind": delivery.kind,
        "state": delivery.state,
        "attempts": delivery.attempts,
        "lastError": delivery.last_error,
        "createdAt": format_time(delivery.created_at),
        "nextAttemptAt": (delivery.state == "pending").then(|| format_time(delivery.next_attempt_at)),
        "finishedAt": delivery.finished_at.map(format_time),
        "attemptLog": delivery.attempt_log.iter().map(|attempt| json!({
            "at": format_time(attempt.at), "state": attempt.state, "detail": attempt.detail, "durationMs": attempt.duration_ms,
        })).collect::<Vec<_>>(),
    })
}

/// Query of `GET /deliveries`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeliveryQuery {
    state: Option<String>,
    channel: Option<String>,
    limit: Option<usize>,
}

async fn list_deliveries(
    State(state): State<AppState>,
    query: Result<Query<DeliveryQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) = query.map_err(query_error)?;
    let wanted = match query.state.as_deref() {
        None => None,
        Some(text) => Some(OutboxState::parse(text).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!("state: {text:?} is not pending, delivered, rejected or expired"),
            )
        })?),
    };
    let reader = audit(&state)?;
    let channel = query.channel.clone();
    let limit = query.limit.unwrap_or(100);
    let rows = blocking(move || reader.deliveries(wanted, channel.as_deref(), limit)).await?;
    Ok(Json(
        json!({"items": rows.iter().map(delivery_view).collect::<Vec<_>>()}),
    ))
}

/// Every silence: configured ones (read-only, from `rules.silences`) and API ones.
pub async fn all_silences(state: &AppState) -> Result<Vec<Value>, ApiError> {
    let rules = state.pipeline.rules();
    let mut items: Vec<Value> = rules
        .silences()
        .iter()
        .enumerate()
        .map(|(index, silence)| {
            let mut value =
                serde_json::to_value(SilenceConfig::from_silence(silence)).unwrap_or(Value::Null);
            value["id"] = json!(format!("config-{index}"));
            value["source"] = json!("config");
            value
        })
        .collect();
    let reader = audit(state)?;
    for stored in blocking(move || reader.silences()).await? {
        let mut value = serde_json::to_value(SilenceConfig::from_silence(&stored.silence))
            .unwrap_or(Value::Null);
        value["id"] = json!(stored.id);
        value["source"] = json!("api");
        value["createdAt"] = json!(format_time(stored.created_at));
        items.push(value);
    }
    Ok(items)
}

async fn list_silences(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({"items": all_silences(&state).await?})))
}

/// Validates a silence the same way the config loader does.
pub fn validate_silence(silence: &SilenceConfig) -> Result<(), ApiError> {
    let text = serde_json::to_value(silence)
        .map(|value| json!({"rules": {"silences": [value]}}).to_string())
        .unwrap_or_default();
    crate::config::load_str(&text, &|_| None)
        .map(|_| ())
        .map_err(|error| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_silence",
                error.to_string().replace("rules.silences[0]", "silence"),
            )
        })
}

/// Stores a silence and hands the new set to the pipeline.
pub async fn add_silence(
    state: &AppState,
    silence: SilenceConfig,
) -> Result<crate::store::StoredSilence, ApiError> {
    validate_silence(&silence)?;
    audit(state)?;
    // The writer stores it and withdraws the queued reminders it covers; new notices are muted
    // by routing once it is committed.
    match write_silence(state, SilenceRequest::Add(silence.to_silence())).await? {
        SilenceOutcome::Added(stored) => Ok(stored),
        SilenceOutcome::Removed(_) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error",
        )),
    }
}

/// Sends a silence write to the single writer and waits for its commit.
async fn write_silence(
    state: &AppState,
    request: SilenceRequest,
) -> Result<SilenceOutcome, ApiError> {
    let receiver = state
        .pipeline
        .silence(request)
        .map_err(|error| ApiError::unavailable(&error))?;
    match receiver.await {
        Ok(Ok(outcome)) => Ok(outcome),
        Ok(Err(error)) => Err(ApiError::unavailable(&error)),
        Err(_) => Err(ApiError::unavailable(&crate::pipeline::Error::Stopped)),
    }
}

async fn create_silence(
    State(state): State<AppState>,
    body: Result<Json<SilenceConfig>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(silence) = body.map_err(|error| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_silence",
            error.body_text(),
        )
    })?;
    let stored = add_silence(&state, silence).await?;
    let mut value =
        serde_json::to_value(SilenceConfig::from_silence(&stored.silence)).unwrap_or(Value::Null);
    value["id"] = json!(stored.id);
    value["source"] = json!("api");
    value["createdAt"] = json!(format_time(stored.created_at));
    Ok((StatusCode::CREATED, Json(value)).into_response())
}

async fn delete_silence(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if id.starts_with("config-") {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "read_only",
            "configured silences are removed by editing rules.silences",
        ));
    }
    audit(&state)?;
    if write_silence(&state, SilenceRequest::Remove(id.clone())).await?
        != SilenceOutcome::Removed(true)
    {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no silence {id:?}"),
        ));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportQuery {
    format: Option<String>,
    window: Option<String>,
}

/// Builds the report from the store.
pub async fn build_report(
    state: &AppState,
    window: std::time::Duration,
) -> Result<crate::report::Report, ApiError> {
    let reader = audit(state)?;
    let now = chrono::Utc::now().timestamp_millis();
    let start = now - i64::try_from(window.as_millis()).unwrap_or(i64::MAX / 2);
    let (open, resolved) =
        blocking(move || Ok((reader.open_drifts()?, reader.resolved_since(start)?))).await?;
    Ok(crate::report::build(&open, &resolved, start, now))
}

async fn report(
    State(state): State<AppState>,
    query: Result<Query<ReportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(query_error)?;
    let window = match &query.window {
        Some(text) => crate::time::parse_duration(text).map_err(|message| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!("window: {message}"),
            )
        })?,
        None => std::time::Duration::from_secs(30 * 24 * 3600),
    };
    let report = build_report(&state, window).await?;
    Ok(match query.format.as_deref().unwrap_or("json") {
        "json" => Json(serde_json::to_value(&report).unwrap_or(Value::Null)).into_response(),
        "markdown" => (
            [(header::CONTENT_TYPE, "text/markdown; charset=utf-8")],
            crate::report::markdown(&report),
        )
            .into_response(),
        "html" => (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            crate::report::html(&report),
        )
            .into_response(),
        other => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!("format: {other:?} is not json, markdown or html"),
            ));
        }
    })
}
