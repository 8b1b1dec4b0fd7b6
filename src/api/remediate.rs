//! `POST /api/v1/drifts/{id}/remediate`: a person approves the action a `manual` remediation
//! rule offers for a firing drift. The single writer decides it with the rails in force and
//! commits the attempt (so the answer comes after the attempt is durable): `202` with the
//! attempt (`dryRun`, or `planned` for the sender), `403` when no rule offers that action (or a
//! rail refuses it: the refusal is recorded in the drift's history), `409` when the drift moved
//! on (pending, resolved, or its fields no longer hold the drifted values), `404` when there is no
//! such drift.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::{audit, blocking, no_query, ApiState, NoQuery};
use crate::error::ApiError;
use crate::pipeline::{Approval, ApprovalOutcome};
use drift_core::remediate::Action;
use drift_model::remediation::Outcome;

/// Most characters of `approvedBy` (a name or an e-mail address, kept in the history).
const MAX_APPROVER: usize = 200;

/// The body of an approval.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ApprovalInput {
    action: String,
    approved_by: String,
}

fn invalid(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_approval", message)
}

/// The approval of a body, or what is wrong with it (naming the field).
pub(crate) fn approval(id: &str, action: &str, approved_by: &str) -> Result<Approval, ApiError> {
    let parsed = Action::parse(action).ok_or_else(|| {
        invalid(format!(
            "action: expected revert, rollback, restore or deleteOrphan, got {action:?}"
        ))
    })?;
    let approver = approved_by.trim();
    if approver.is_empty() {
        return Err(invalid(
            "approvedBy: who approves is required (it is kept in the drift's history)".into(),
        ));
    }
    if approver.chars().count() > MAX_APPROVER || approver.chars().any(char::is_control) {
        return Err(invalid(format!(
            "approvedBy: at most {MAX_APPROVER} characters, no control characters"
        )));
    }
    Ok(Approval {
        drift_id: id.to_string(),
        action: parsed,
        approved_by: approver.to_string(),
    })
}

pub(super) async fn post_remediate(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    query: Result<Query<NoQuery>, axum::extract::rejection::QueryRejection>,
    body: Result<Json<ApprovalInput>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    no_query(query)?;
    let Json(input) = body.map_err(|error| {
        let too_large = error.status() == StatusCode::PAYLOAD_TOO_LARGE;
        let text = error.body_text();
        let answer = super::body_error(error, "invalid_approval");
        if too_large {
            answer
        } else {
            answer.with_message(format!(
                "the body must be {{\"action\": \"revert|rollback|restore|deleteOrphan\", \
                 \"approvedBy\": \"who\"}}: {text}"
            ))
        }
    })?;
    let approval = approval(&id, &input.action, &input.approved_by)?;
    let attempt = approve(&state, approval).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"attempt": super::drifts::remediation_view(&attempt)})),
    )
        .into_response())
}

/// Sends an approval to the writer and waits for its commit: the recorded attempt when the rails
/// let it through, else the error the API answers.
pub(crate) async fn approve(
    state: &ApiState,
    approval: Approval,
) -> Result<drift_model::remediation::Attempt, ApiError> {
    let reader = audit(state)?;
    let id = approval.drift_id.clone();
    let pipeline = state.pipeline.clone();
    // Waiting for room in the queue blocks: off the async runtime (the request timeout bounds it).
    let queued = tokio::task::spawn_blocking(move || pipeline.approve(approval)).await;
    let answered = match queued {
        Ok(Ok(receiver)) => receiver.await.ok(),
        _ => None,
    };
    let outcome = match answered {
        Some(Ok(outcome)) => outcome,
        _ => {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store",
                "the store cannot answer now; retry later",
            ))
        }
    };
    let moved_on = |message: String| ApiError::new(StatusCode::CONFLICT, "moved_on", message);
    match outcome {
        ApprovalOutcome::Unknown => {
            // A resolved drift has left the writer's state; the store still knows it.
            let lookup = id.clone();
            if blocking(move || reader.drift(&lookup)).await?.is_some() {
                Err(moved_on(format!(
                    "drift {id} resolved: only a firing drift is remediated"
                )))
            } else {
                Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    format!("no drift {id:?}"),
                ))
            }
        }
        ApprovalOutcome::MovedOn(state) => Err(moved_on(format!(
            "drift {id} is {state}: only a firing drift is remediated"
        ))),
        ApprovalOutcome::NotAllowed(why) => {
            Err(ApiError::new(StatusCode::FORBIDDEN, "not_allowed", why))
        }
        ApprovalOutcome::Recorded(attempt) if attempt.outcome == Outcome::Refused => {
            let detail = attempt.detail.clone().unwrap_or_default();
            if attempt.reason.as_deref() == Some("stale") {
                Err(moved_on(detail))
            } else {
                Err(ApiError::new(StatusCode::FORBIDDEN, "refused", detail))
            }
        }
        ApprovalOutcome::Recorded(attempt) => Ok(*attempt),
    }
}
