//! `remediations.body` (schema version 5): a remediation attempt as stored. The row's `outcome`
//! column repeats the body's outcome, so a sender can find the planned attempts without reading
//! bodies.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::{borrowed, corrupt, owned};
use crate::Error;
use drift_model::remediation::{Attempt, Outcome, PlannedRequest};
use drift_model::Millis;

/// `remediations.body`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AttemptRow<'a> {
    pub(crate) drift_id: Cow<'a, str>,
    #[serde(default)]
    pub(crate) cluster: Cow<'a, str>,
    #[serde(default)]
    pub(crate) object: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "<[_]>::is_empty")]
    pub(crate) fields: Cow<'a, [String]>,
    pub(crate) at: Millis,
    pub(crate) mode: Cow<'a, str>,
    pub(crate) action: Cow<'a, str>,
    pub(crate) rule: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) approved_by: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) request: Option<RequestRow<'a>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) resource_version: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) judged: Option<Cow<'a, str>>,
    pub(crate) outcome: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) resource_version_after: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) detail: Option<Cow<'a, str>>,
}

/// The request inside an [`AttemptRow`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RequestRow<'a> {
    pub(crate) method: Cow<'a, str>,
    pub(crate) path: Cow<'a, str>,
    pub(crate) content_type: Cow<'a, str>,
    pub(crate) body: Cow<'a, str>,
}

impl<'a> From<&'a Attempt> for AttemptRow<'a> {
    fn from(attempt: &'a Attempt) -> AttemptRow<'a> {
        AttemptRow {
            drift_id: Cow::Borrowed(&attempt.drift_id),
            cluster: Cow::Borrowed(&attempt.cluster),
            object: Cow::Borrowed(&attempt.object),
            fields: Cow::Borrowed(&attempt.fields),
            at: attempt.at,
            mode: Cow::Borrowed(&attempt.mode),
            action: Cow::Borrowed(&attempt.action),
            rule: Cow::Borrowed(&attempt.rule),
            approved_by: borrowed(&attempt.approved_by),
            request: attempt.request.as_ref().map(|request| RequestRow {
                method: Cow::Borrowed(&request.method),
                path: Cow::Borrowed(&request.path),
                content_type: Cow::Borrowed(&request.content_type),
                body: Cow::Borrowed(&request.body),
            }),
            resource_version: borrowed(&attempt.resource_version),
            judged: borrowed(&attempt.judged),
            outcome: Cow::Borrowed(attempt.outcome.as_str()),
            status: attempt.status,
            resource_version_after: borrowed(&attempt.resource_version_after),
            reason: borrowed(&attempt.reason),
            detail: borrowed(&attempt.detail),
        }
    }
}

/// The stored text of an attempt (`remediations.body`).
pub(crate) fn attempt_body(attempt: &Attempt) -> Result<String, Error> {
    serde_json::to_string(&AttemptRow::from(attempt)).map_err(corrupt("remediations"))
}

/// The attempt of a stored `remediations.body`; an outcome this binary does not know is
/// corrupt, not guessed.
pub(crate) fn decode_attempt(body: &str) -> Result<Attempt, Error> {
    let row: AttemptRow<'_> = serde_json::from_str(body).map_err(corrupt("remediations"))?;
    from_row(row).map_err(|error| corrupt("remediations")(serde::de::Error::custom(error)))
}

/// The attempt of a row (an unknown outcome is an error).
pub(crate) fn from_row(row: AttemptRow<'_>) -> Result<Attempt, String> {
    let outcome =
        Outcome::parse(&row.outcome).ok_or_else(|| format!("unknown outcome {:?}", row.outcome))?;
    Ok(Attempt {
        drift_id: row.drift_id.into_owned(),
        cluster: row.cluster.into_owned(),
        object: row.object.into_owned(),
        fields: row.fields.into_owned(),
        at: row.at,
        mode: row.mode.into_owned(),
        action: row.action.into_owned(),
        rule: row.rule.into_owned(),
        approved_by: owned(row.approved_by),
        request: row.request.map(|request| PlannedRequest {
            method: request.method.into_owned(),
            path: request.path.into_owned(),
            content_type: request.content_type.into_owned(),
            body: request.body.into_owned(),
        }),
        resource_version: owned(row.resource_version),
        judged: owned(row.judged),
        outcome,
        status: row.status,
        resource_version_after: owned(row.resource_version_after),
        reason: owned(row.reason),
        detail: owned(row.detail),
    })
}
