//! Re-check on demand: `POST /api/v1/resync` starts a resync pass now (`202`, the status with the
//! pass running), `GET /api/v1/resync` shows the pass running and the last one. The loop itself
//! is `cluster`'s; the API reaches it only through the [`crate::pipeline::ResyncControl`] it
//! shares with it, so a request never waits for the pass.
//!
//! Refusals are `409`: `resync_running` while a pass runs (or was claimed and is about to run),
//! `resync_off` when no resync loop runs (resync disabled, or no cluster configuration). Both are
//! a conflict with the server's state, not a missing resource: `GET` answers either way.

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::{no_query, ApiState, NoQuery};
use crate::error::ApiError;
use crate::pipeline::{ResyncStatus, StartError};
use drift_model::time::format_time;
use drift_model::wire::resync::{PassView, ResyncView, RunningView};

/// The status as the API shows it.
pub(crate) fn view(status: &ResyncStatus) -> ResyncView {
    ResyncView {
        enabled: status.enabled,
        running: status.running.as_ref().map(|running| RunningView {
            trigger: running.trigger.as_str(),
            started_at: format_time(running.started_at),
            resources: running.resources,
            resources_done: running.resources_done,
            listed: running.listed,
        }),
        last_pass: status.last.as_ref().map(|pass| PassView {
            trigger: pass.trigger.as_str(),
            started_at: format_time(pass.started_at),
            finished_at: format_time(pass.finished_at),
            outcome: pass.outcome.as_str(),
            listed: pass.listed,
            missed: pass.missed,
            deleted: pass.deleted,
            drifts_found: pass.drifts_found_total(),
            drifts_found_by_class: pass.drifts_found.clone(),
            rejected: pass.rejected,
            conflicts: pass.conflicts,
            errors: pass.errors.clone(),
            first_error: pass.first_error.clone(),
        }),
        next_pass_at: status.next_at.map(format_time),
    }
}

/// Asks the loop for a pass now. The dashboard's button goes through here too.
pub(crate) fn start(state: &ApiState) -> Result<ResyncStatus, StartError> {
    state.resync.request((state.clock)())?;
    tracing::info!(message = "Resync pass requested through the API.");
    Ok(state.resync.status())
}

/// A refusal as the API answers it.
fn refusal(error: &StartError) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, error.kind(), error.to_string())
}

pub(super) async fn get_status(
    State(state): State<ApiState>,
    query: Result<Query<NoQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<ResyncView>, ApiError> {
    no_query(query)?;
    Ok(Json(view(&state.resync.status())))
}

pub(super) async fn post_resync(
    State(state): State<ApiState>,
    query: Result<Query<NoQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    no_query(query)?;
    let status = start(&state).map_err(|error| refusal(&error))?;
    let mut response = (StatusCode::ACCEPTED, Json(view(&status))).into_response();
    response
        .headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static("/api/v1/resync"));
    Ok(response)
}
