//! The API: the drift API (`/api/v1`), the dashboard (`/ui`) and the report, over the store's
//! read-only audit side. JSON in and out (the public shapes are `wire`'s); times are RFC 3339.
//! Protected by a bearer token when `api.token` is set (the CloudEvents ingest keeps its own
//! auth). Writes (silences, remediation approvals) go through the pipeline's single writer; a resync pass is asked of
//! the resync loop through the control they share. Time comes from the injected clock.
//!
//! Every answer forbids framing and content sniffing, and a browser's cross-origin write is
//! refused ([`browser`]).
//!
//! Files: [`drifts`] (drifts, their detail and deliveries, the `group` filter), [`remediate`]
//! (approvals of a `manual` remediation rule's action), [`silences`],
//! [`resync`] (re-check on demand), [`fleet`] (the fleet view, JSON and its dashboard page),
//! [`report`] (the report model, its renderers and its route), [`ui`] (the dashboard),
//! [`overview`] (the dashboard's overview and its SVG chart), [`browser`] (security headers,
//! cross-origin writes, HTTPS). With `ingest`, the only modules that know axum.

pub mod browser;
pub mod drifts;
pub mod fleet;
pub mod overview;
pub mod remediate;
pub mod report;
pub mod resync;
pub mod silences;
pub mod ui;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;

use crate::error::ApiError;
use crate::ingest::auth::{bearer, same_secret};
use crate::pipeline::{Pipeline, ResyncControl};
use drift_core::config::Secret;
use drift_model::time::Clock;
use drift_store::AuditRead;

/// Shared state of the API and dashboard handlers.
#[derive(Clone)]
pub struct ApiState {
    /// Audit queries; `None` without an audit store (some router tests): `503`.
    pub audit: Option<Arc<dyn AuditRead>>,
    /// Bearer token protecting `/api/v1` and `/ui`.
    pub token: Option<Secret>,
    /// The single writer (silences) and the rules in force (configured silences).
    pub pipeline: Pipeline,
    /// Now, for reports and silence expiries.
    pub clock: Clock,
    /// `publicUrl`: the origin browsers use when a proxy rewrites `Host`, and whether the
    /// dashboard is served over HTTPS.
    pub public_url: Option<String>,
    /// The resync loop's control: `POST /api/v1/resync` and the dashboard's button start a pass
    /// through it, and its status is shown. A control no loop attached to refuses (`resync_off`).
    pub resync: Arc<ResyncControl>,
}

/// The routes of the API (`/api/v1`) and the dashboard (`/ui`), ready to merge into the
/// server's router.
pub fn router(state: ApiState) -> Router {
    let api = Router::new()
        .route("/drifts", get(drifts::list_drifts))
        .route("/drifts/{id}", get(drifts::get_drift))
        .route("/drifts/{id}/remediate", post(remediate::post_remediate))
        .route("/deliveries", get(drifts::list_deliveries))
        .route(
            "/silences",
            get(silences::list_silences).post(silences::create_silence),
        )
        .route("/silences/{id}", delete(silences::delete_silence))
        .route("/report", get(report::report))
        .route("/resync", get(resync::get_status).post(resync::post_resync))
        .route("/fleet", get(fleet::get_fleet))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        // Outermost: a cross-origin write learns nothing, not even whether its token was valid.
        .layer(middleware::from_fn_with_state(
            state.clone(),
            browser::refuse_cross_origin,
        ));
    Router::new()
        .nest("/api/v1", api)
        .nest("/ui", ui::routes(state.clone()))
        .with_state(state)
        .layer(middleware::map_response(browser::security_headers))
}

async fn require_token(State(state): State<ApiState>, request: Request, next: Next) -> Response {
    if let Some(expected) = &state.token {
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

/// The audit reader, or a `503` when the store has none (some router tests).
pub fn audit(state: &ApiState) -> Result<Arc<dyn AuditRead>, ApiError> {
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
    work: impl FnOnce() -> Result<T, drift_store::Error> + Send + 'static,
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

/// A query string that does not parse (an unknown parameter, a value of the wrong type), as the
/// same JSON `400` as every other query error.
pub(crate) fn query_error(error: axum::extract::rejection::QueryRejection) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", error.body_text())
}

/// A JSON body that does not parse, as a `400` with `code` (a body over the limit: `413`).
pub(crate) fn body_error(
    error: axum::extract::rejection::JsonRejection,
    code: &'static str,
) -> ApiError {
    if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            error.body_text(),
        )
    } else {
        ApiError::new(StatusCode::BAD_REQUEST, code, error.body_text())
    }
}

/// The page size of every list (`limit`) when none is asked for.
pub(crate) const DEFAULT_PAGE: usize = 100;
/// The most items of a list page: a larger `limit` is capped to it, and the page says so.
pub(crate) const MAX_PAGE: usize = 500;

/// A `limit` parameter: digits, any number of them (a number past what fits is as large as
/// can be, so it is capped like any other past [`MAX_PAGE`]); anything else is a `400` saying so.
pub(crate) fn limit_parameter<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<usize>, D::Error> {
    let Some(text) = <Option<String> as serde::Deserialize>::deserialize(deserializer)? else {
        return Ok(None);
    };
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(serde::de::Error::custom(
            "limit must be a whole number from 1 (larger values are capped)",
        ));
    }
    Ok(Some(text.parse().unwrap_or(usize::MAX)))
}

/// A list's page size from its `limit` parameter: absent is [`DEFAULT_PAGE`], `0` is a `400`
/// (a page without items would never reach the next), past [`MAX_PAGE`] is capped, and
/// `capped` tells the page to say so (`limitCapped`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageSize {
    /// Items per page, at most [`MAX_PAGE`].
    pub limit: usize,
    /// The `limit` asked for was larger than [`MAX_PAGE`].
    pub capped: bool,
}

impl PageSize {
    /// The page size asked for, or the message of its `400`.
    pub(crate) fn of(limit: Option<usize>) -> Result<PageSize, String> {
        match limit {
            None => Ok(PageSize {
                limit: DEFAULT_PAGE,
                capped: false,
            }),
            Some(0) => Err(format!(
                "limit: must be 1 to {MAX_PAGE} (larger values are capped to {MAX_PAGE})"
            )),
            Some(limit) => Ok(PageSize {
                limit: limit.min(MAX_PAGE),
                capped: limit > MAX_PAGE,
            }),
        }
    }

    /// [`PageSize::of`], its error as the API's `400`.
    pub(crate) fn parse(limit: Option<usize>) -> Result<PageSize, ApiError> {
        PageSize::of(limit)
            .map_err(|message| ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", message))
    }

    /// The fields every list page carries about its size.
    pub(crate) fn insert_into(self, page: &mut serde_json::Value) {
        page["limit"] = serde_json::json!(self.limit);
        page["limitCapped"] = serde_json::json!(self.capped);
    }
}

/// The query of a route that takes no parameters: any parameter is refused, so a filter that
/// a route does not have is never silently ignored.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoQuery {}

/// `Ok` for an empty query, else the JSON `400` of [`query_error`].
pub(crate) fn no_query(
    query: Result<axum::extract::Query<NoQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<(), ApiError> {
    query.map(|_| ()).map_err(query_error)
}
