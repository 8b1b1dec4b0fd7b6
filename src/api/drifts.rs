//! Drifts: the list (filters, pages), one drift with its history and deliveries, and the
//! deliveries list. The detail lookup is shared with the dashboard.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{audit, blocking, no_query, query_error, ApiState, NoQuery};
use crate::error::ApiError;
use drift_core::classify::classes;
use drift_model::remediation::Attempt;
use drift_model::time::format_time;
use drift_model::wire::drift::{DriftView, EvidenceView};
use drift_model::{group, Drift, Millis, SEVERITIES};
use drift_store::{DeliveryView, DriftFilter, HistoryEntry, OutboxState};

/// A drift as the API shows it (`wire::drift::DriftView`): the record with times as RFC 3339.
pub(crate) fn drift_view(drift: &Drift) -> Value {
    serde_json::to_value(DriftView::from(drift)).unwrap_or(Value::Null)
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
    /// An API group family (`eventing`) or one of its groups (`messaging.knative.dev`, `core`):
    /// `model::group`.
    pub group: Option<String>,
    /// RFC 3339.
    pub since: Option<String>,
    /// Page size (default 100, at most 500: more is capped, and the page says `limitCapped`;
    /// 0 is a `400`).
    #[serde(default, deserialize_with = "super::limit_parameter")]
    pub limit: Option<usize>,
    /// From the previous page's `nextCursor`.
    pub cursor: Option<String>,
}

/// A drift query that does not validate: which parameter, and the API's message (which quotes
/// the value given; the dashboard shows its own words instead).
#[derive(Debug)]
pub struct InvalidQuery {
    /// The parameter.
    pub field: &'static str,
    message: String,
}

impl From<InvalidQuery> for ApiError {
    fn from(invalid: InvalidQuery) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", invalid.message)
    }
}

/// Validates a drift query into a store filter.
pub fn filter(query: &DriftQuery) -> Result<DriftFilter, InvalidQuery> {
    let invalid = |field: &'static str, message: String| InvalidQuery { field, message };
    if let Some(state) = &query.state {
        if !["pending", "firing", "resolved", "open"].contains(&state.as_str()) {
            return Err(invalid(
                "state",
                format!("state: {state:?} is not pending, firing, resolved or open"),
            ));
        }
    }
    if let Some(class) = &query.class {
        if !classes::is_known(class) {
            return Err(invalid(
                "class",
                format!("class: unknown drift class {class:?}"),
            ));
        }
    }
    if let Some(severity) = &query.severity {
        if !SEVERITIES.contains(&severity.as_str()) {
            return Err(invalid(
                "severity",
                format!("severity: must be one of {}", SEVERITIES.join(", ")),
            ));
        }
    }
    let page = super::PageSize::of(query.limit).map_err(|message| invalid("limit", message))?;
    let groups = query.group.as_deref().map(groups_of).transpose()?;
    let cursor = match &query.cursor {
        None => None,
        Some(text) => {
            let malformed = || invalid("cursor", "cursor: malformed".to_string());
            let (since, id) = text.split_once('.').ok_or_else(malformed)?;
            Some((
                since.parse::<Millis>().map_err(|_| malformed())?,
                id.to_string(),
            ))
        }
    };
    let since =
        match query.since.as_deref() {
            None => None,
            Some(text) => Some(drift_model::time::parse_time(text).ok_or_else(|| {
                invalid("since", format!("since: {text:?} is not an RFC 3339 time"))
            })?),
        };
    Ok(DriftFilter {
        state: query.state.clone(),
        class: query.class.clone(),
        severity: query.severity.clone(),
        cluster: query.cluster.clone(),
        namespace: query.namespace.clone(),
        groups,
        since,
        limit: page.limit,
        cursor,
    })
}

/// The API groups a `group` parameter selects (a family or one of its groups), or the `400`
/// that names the values it takes. Shared by the drift list, the dashboard and the report.
pub(crate) fn groups_of(value: &str) -> Result<Vec<String>, InvalidQuery> {
    group::groups_selected_by(value)
        .map(|groups| groups.into_iter().map(str::to_string).collect())
        .ok_or_else(|| InvalidQuery {
            field: "group",
            message: format!(
                "group: {value:?} is not an API group family or one of its groups; use one of {}",
                group::filter_values().join(", ")
            ),
        })
}

/// A drift with everything that happened to it.
pub struct DriftDetail {
    /// The drift.
    pub drift: Drift,
    /// Its moves, oldest first.
    pub history: Vec<HistoryEntry>,
    /// Its remediation attempts, oldest first.
    pub remediations: Vec<Attempt>,
    /// Its deliveries.
    pub deliveries: Vec<DeliveryView>,
}

/// A drift with its history, remediation attempts and deliveries, or `None` when there is no
/// such drift: the one lookup behind `GET /api/v1/drifts/{id}` and the dashboard's drift page.
pub async fn detail(state: &ApiState, id: &str) -> Result<Option<DriftDetail>, ApiError> {
    let reader = audit(state)?;
    let lookup = id.to_string();
    blocking(move || {
        let Some(drift) = reader.drift(&lookup)? else {
            return Ok(None);
        };
        Ok(Some(DriftDetail {
            drift,
            history: reader.history(&lookup)?,
            remediations: reader.remediations(&lookup)?,
            deliveries: reader.deliveries_of(&lookup)?,
        }))
    })
    .await
}

pub(super) async fn list_drifts(
    State(state): State<ApiState>,
    query: Result<Query<DriftQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) = query.map_err(query_error)?;
    let filter = filter(&query)?;
    let reader = audit(&state)?;
    let page = super::PageSize::parse(query.limit)?;
    let (drifts, next) = blocking(move || reader.drifts(&filter)).await?;
    let mut body = json!({
        "items": drifts.iter().map(drift_view).collect::<Vec<_>>(),
        "nextCursor": next.map(|(since, id)| format!("{since}.{id}")),
    });
    page.insert_into(&mut body);
    Ok(Json(body))
}

pub(super) async fn get_drift(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    query: Result<Query<NoQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    no_query(query)?;
    let Some(DriftDetail {
        drift,
        history,
        remediations,
        deliveries,
    }) = detail(&state, &id).await?
    else {
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
        "remediations": remediations.iter().map(remediation_view).collect::<Vec<_>>(),
        "deliveries": deliveries.iter().map(delivery_view).collect::<Vec<_>>(),
    })))
}

/// An attempt as the API shows it: the request's body as JSON (it is JSON text as planned).
pub(super) fn remediation_view(attempt: &Attempt) -> Value {
    json!({
        "at": format_time(attempt.at),
        "mode": attempt.mode,
        "action": attempt.action,
        "rule": attempt.rule,
        "approvedBy": attempt.approved_by,
        "request": attempt.request.as_ref().map(|request| json!({
            "method": request.method,
            "path": request.path,
            "contentType": request.content_type,
            "body": serde_json::from_str::<Value>(&request.body).unwrap_or_else(|_| Value::String(request.body.clone())),
        })),
        "resourceVersion": attempt.resource_version,
        "outcome": attempt.outcome.as_str(),
        "status": attempt.status,
        "resourceVersionAfter": attempt.resource_version_after,
        "reason": attempt.reason,
        "detail": attempt.detail,
    })
}

fn delivery_view(delivery: &DeliveryView) -> Value {
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
pub(super) struct DeliveryQuery {
    state: Option<String>,
    channel: Option<String>,
    #[serde(default, deserialize_with = "super::limit_parameter")]
    limit: Option<usize>,
}

pub(super) async fn list_deliveries(
    State(state): State<ApiState>,
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
    let page = super::PageSize::parse(query.limit)?;
    let limit = page.limit;
    let rows = blocking(move || reader.deliveries(wanted, channel.as_deref(), limit)).await?;
    let mut body = json!({"items": rows.iter().map(delivery_view).collect::<Vec<_>>()});
    page.insert_into(&mut body);
    Ok(Json(body))
}
