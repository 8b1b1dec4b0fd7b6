//! Silences: configured ones (read-only, from `rules.silences`) and those created through the
//! API, which the pipeline's single writer stores.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::{audit, blocking, no_query, ApiState, NoQuery};
use crate::error::ApiError;
use crate::pipeline::{SilenceOutcome, SilenceRequest};
use drift_model::wire::silence::{SilenceInput, SilenceView};
use drift_model::Silence;

/// Query of `GET /silences`: pages like the drifts list.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SilenceQuery {
    /// Page size (default 100, at most 500: more is capped and the page says so; 0 is a `400`).
    #[serde(default, deserialize_with = "super::limit_parameter")]
    limit: Option<usize>,
    /// From the previous page's `nextCursor`.
    cursor: Option<String>,
}

/// Where a page of silences starts after: the configured silence at this index, or the API
/// silence created at this time with this id (they are listed configured first, in config
/// order, then by creation time and id).
#[derive(Debug, Clone, PartialEq, Eq)]
enum SilenceCursor {
    Configured(usize),
    Created(drift_model::Millis, String),
}

impl SilenceCursor {
    fn parse(text: &str) -> Option<SilenceCursor> {
        if let Some(index) = text.strip_prefix("config.") {
            return index.parse().ok().map(SilenceCursor::Configured);
        }
        let (at, id) = text.split_once('.')?;
        Some(SilenceCursor::Created(at.parse().ok()?, id.to_string()))
    }

    fn text(&self) -> String {
        match self {
            SilenceCursor::Configured(index) => format!("config.{index}"),
            SilenceCursor::Created(at, id) => format!("{at}.{id}"),
        }
    }
}

pub(super) async fn list_silences(
    State(state): State<ApiState>,
    query: Result<Query<SilenceQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) = query.map_err(super::query_error)?;
    let page = super::PageSize::parse(query.limit)?;
    let after = match query.cursor.as_deref() {
        None => None,
        Some(text) => Some(SilenceCursor::parse(text).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                "cursor: malformed",
            )
        })?),
    };
    let rules = state.pipeline.rules();
    let configured = rules.silences();
    // Configured silences first (they are few: the config's), then a page of the store's.
    let first_configured = match &after {
        None => 0,
        // A forged cursor past the end (even the largest number) is past every configured one.
        Some(SilenceCursor::Configured(index)) => index.saturating_add(1).min(configured.len()),
        Some(SilenceCursor::Created(..)) => configured.len(),
    };
    let mut items = Vec::new();
    let mut last = None;
    for (index, silence) in configured.iter().enumerate().skip(first_configured) {
        if items.len() == page.limit {
            break;
        }
        items.push(view(SilenceView::configured(index, silence)));
        last = Some(SilenceCursor::Configured(index));
    }
    let configured_left = first_configured + items.len() < configured.len();
    let store_after = match after {
        Some(SilenceCursor::Created(at, id)) => Some((at, id)),
        _ => None,
    };
    // A page already full still asks for one stored silence: is there a next page?
    let room = page.limit - items.len();
    let reader = audit(&state)?;
    let (stored, stored_next) =
        blocking(move || reader.silences_page(store_after.as_ref(), room.max(1))).await?;
    let next = if room == 0 {
        (configured_left || !stored.is_empty()).then_some(last)
    } else {
        for stored in &stored {
            items.push(view(SilenceView::created(
                &stored.id,
                &stored.silence,
                stored.created_at,
            )));
        }
        Some(stored_next.map(|(at, id)| SilenceCursor::Created(at, id)))
    }
    .flatten()
    .map(|cursor| cursor.text());
    let mut body = json!({"items": items, "nextCursor": next});
    page.insert_into(&mut body);
    Ok(Json(body))
}

/// The JSON of a silence (its keys in sorted order, as serde_json writes a map).
fn view(silence: SilenceView) -> Value {
    serde_json::to_value(silence).unwrap_or(Value::Null)
}

/// Validates a silence the same way the config loader does.
pub(crate) fn validate_silence(silence: &Silence) -> Result<(), ApiError> {
    let value = json!({
        "matchers": silence.matchers,
        "expiresAt": silence.expires_at,
        "comment": silence.comment,
    });
    let text = json!({"rules": {"silences": [value]}}).to_string();
    drift_core::config::load_str(&text, &|_| None)
        .map(|_| ())
        .map_err(|error| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_silence",
                error.to_string().replace("rules.silences[0]", "silence"),
            )
        })
}

/// A silence not created: `limits.maxActiveSilences` (the number) are active already. The API
/// answers it `409 too_many_silences`; the dashboard's form with its own page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooManySilences(pub usize);

impl TooManySilences {
    /// What to do about it.
    pub(crate) fn message(self) -> String {
        format!(
            "{} silences are active, the most limits.maxActiveSilences allows: remove one \
             (DELETE /api/v1/silences/{{id}}) or wait for one to expire",
            self.0
        )
    }
}

impl From<TooManySilences> for ApiError {
    fn from(refused: TooManySilences) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, "too_many_silences", refused.message())
    }
}

/// Stores a silence and hands the new set to the pipeline.
pub(crate) async fn add_silence(
    state: &ApiState,
    silence: Silence,
) -> Result<Result<drift_store::StoredSilence, TooManySilences>, ApiError> {
    validate_silence(&silence)?;
    // An expiry already past would store a silence that matches nothing: a mistake (a wrong
    // year, a time zone) that the caller should hear about. Configured silences are not held
    // to this: one that has expired is harmless, and refusing it would make a config that
    // loaded yesterday fail to load after a restart today.
    if let Some(expires) = &silence.expires_at {
        if drift_model::time::parse_time(expires).is_some_and(|at| at <= (state.clock)()) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_silence",
                format!("silence.expiresAt: {expires:?} is in the past"),
            ));
        }
    }
    audit(state)?;
    // The writer stores it and withdraws the queued reminders it covers; new notices are muted
    // by routing once it is committed.
    match write_silence(state, SilenceRequest::Add(silence)).await? {
        SilenceOutcome::Added(stored) => Ok(Ok(stored)),
        SilenceOutcome::Refused { max_active } => Ok(Err(TooManySilences(max_active))),
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
    let pipeline = state.pipeline.clone();
    // Waiting for room in the queue blocks: off the async runtime (the request timeout bounds it).
    let queued = tokio::task::spawn_blocking(move || pipeline.silence(request)).await;
    let answered = match queued {
        Ok(Ok(receiver)) => receiver.await.ok(),
        _ => None,
    };
    match answered {
        Some(Ok(outcome)) => Ok(outcome),
        // The store's answer, as the API has always given it.
        _ => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store",
            "the store cannot answer now; retry later",
        )),
    }
}

pub(super) async fn create_silence(
    State(state): State<ApiState>,
    query: Result<Query<NoQuery>, axum::extract::rejection::QueryRejection>,
    body: Result<Json<SilenceInput>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    no_query(query)?;
    let Json(silence) = body.map_err(|error| super::body_error(error, "invalid_silence"))?;
    let stored = add_silence(&state, silence.into_silence()).await??;
    let value = view(SilenceView::created(
        &stored.id,
        &stored.silence,
        stored.created_at,
    ));
    Ok((StatusCode::CREATED, Json(value)).into_response())
}

pub(super) async fn delete_silence(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    query: Result<Query<NoQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    no_query(query)?;
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
