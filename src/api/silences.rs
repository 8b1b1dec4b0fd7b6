//! Silences: configured ones (read-only, from `rules.silences`) and those created through the
//! API, which the pipeline's single writer stores.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::{audit, blocking, ApiState};
use crate::config::SilenceConfig;
use crate::ingest::ApiError;
use crate::pipeline::{SilenceOutcome, SilenceRequest};
use crate::time::format_time;

/// Every silence: configured ones (read-only, from `rules.silences`) and API ones.
pub(crate) async fn all_silences(state: &ApiState) -> Result<Vec<Value>, ApiError> {
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

pub(super) async fn list_silences(State(state): State<ApiState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({"items": all_silences(&state).await?})))
}

/// Validates a silence the same way the config loader does.
pub(crate) fn validate_silence(silence: &SilenceConfig) -> Result<(), ApiError> {
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
pub(crate) async fn add_silence(
    state: &ApiState,
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
    state: &ApiState,
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

pub(super) async fn create_silence(
    State(state): State<ApiState>,
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

pub(super) async fn delete_silence(
    State(state): State<ApiState>,
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
