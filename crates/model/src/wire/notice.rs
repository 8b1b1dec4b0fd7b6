//! The webhook body, and the data of the `cloudevents` channel: one notice per drift, in an
//! envelope that says what kind of message it is.

use std::collections::BTreeMap;

use serde::Serialize;

use super::DiffEntry;
use crate::time::format_time;
use crate::{Millis, Notice, NoticeKind};

/// The webhook body: an envelope with every notice of the message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookBody {
    /// `drift.firing`, `drift.resolved`, `drift.remediation` or `drift.digest`.
    #[serde(rename = "type")]
    pub message_type: String,
    /// This attempt's time.
    pub timestamp: String,
    /// The idempotency key (also `webhook-id`).
    pub notification_id: String,
    /// Drifts left out of a digest for size.
    pub omitted: usize,
    /// The drifts.
    pub data: Vec<NoticeJson>,
}

/// One drift in a message, as of its transition.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NoticeJson {
    /// Episode id.
    pub id: String,
    /// Class id.
    pub class: String,
    /// The rule of an `invariant` drift.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// `firing` or `resolved`.
    pub state: &'static str,
    /// True for `repeatInterval` reminders.
    pub reminder: bool,
    /// `info`, `warning` or `critical`.
    pub severity: &'static str,
    /// Cluster name.
    pub cluster: String,
    /// Object namespace.
    pub namespace: String,
    /// Object kind.
    pub kind: String,
    /// Object `apiVersion`.
    pub api_version: String,
    /// Object name.
    pub name: String,
    /// Object uid.
    pub uid: String,
    /// Knative Service of the object, if any.
    pub service: Option<String>,
    /// Configuration, if any.
    pub configuration: Option<String>,
    /// Revision, if any.
    pub revision: Option<String>,
    /// One sentence: what is wrong.
    pub summary: String,
    /// The field diff.
    pub diff: Vec<DiffEntry>,
    /// Who changed it.
    pub actor: Option<NoticeActor>,
    /// How to fix it.
    pub hint: Option<String>,
    /// Structured facts.
    pub facts: BTreeMap<String, String>,
    /// When the condition was first seen.
    pub first_seen: String,
    /// When it fired.
    pub fired_at: Option<String>,
    /// When it resolved.
    pub resolved_at: Option<String>,
    /// Why it resolved.
    pub resolution: Option<String>,
    /// The transition's time.
    pub last_seen: String,
    /// The drift in the dashboard, with `publicUrl` set.
    pub url: Option<String>,
    /// What a remediation attempt did (a `drift.remediation` message only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remediation: Option<RemediationJson>,
}

/// A remediation attempt in a message: what was done (or not) about the drift, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RemediationJson {
    /// `revert`, `rollback`, `restore` or `deleteOrphan`.
    pub action: String,
    /// `applied`, `dryRun`, `refused`, `conflict` or `failed`.
    pub outcome: &'static str,
    /// `dryRun` or `apply`.
    pub mode: String,
    /// The rule that asked for it.
    pub rule: String,
    /// Who approved it (`null` for an `auto` rule).
    pub approved_by: Option<String>,
    /// The request's method and path (`null` when none was made).
    pub request: Option<String>,
    /// The API server's answer.
    pub status: Option<u16>,
    /// A refusal's or a failure's stable kind.
    pub reason: Option<String>,
    /// The same, in words.
    pub detail: Option<String>,
}

/// Who made a change (every key present; `null` when unknown).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoticeActor {
    /// Field manager.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// When the manager wrote.
    pub time: Option<String>,
    /// Knative's `lastModifier`.
    pub user: Option<String>,
    /// In `trustedManagers`.
    pub trusted: bool,
}

impl NoticeJson {
    /// The public JSON of one notice; `public_url` links it to the dashboard.
    pub fn new(notice: &Notice, public_url: Option<&str>) -> NoticeJson {
        let drift = &notice.drift;
        NoticeJson {
            id: drift.id.clone(),
            class: drift.class.clone(),
            rule: drift.rule.clone(),
            state: match (notice.kind, drift.state) {
                (NoticeKind::Resolved, _) => "resolved",
                // A remediation notice tells the drift's state when the attempt ended.
                (NoticeKind::Remediation, crate::DriftState::Resolved) => "resolved",
                _ => "firing",
            },
            reminder: notice.kind == NoticeKind::Repeat,
            severity: drift.severity.as_str(),
            cluster: drift.cluster.clone(),
            namespace: drift.namespace.clone(),
            kind: drift.kind.clone(),
            api_version: drift.api_version.clone(),
            name: drift.name.clone(),
            uid: drift.uid.clone(),
            service: drift.owner.service.clone(),
            configuration: drift.owner.configuration.clone(),
            revision: drift.owner.revision.clone(),
            summary: drift.evidence.summary.clone(),
            diff: super::diff::entries(&drift.evidence.changes),
            actor: drift.evidence.actor.as_ref().map(|actor| NoticeActor {
                manager: actor.manager.clone(),
                operation: actor.operation.clone(),
                time: actor.time.clone(),
                user: actor.user.clone(),
                trusted: actor.trusted,
            }),
            hint: drift.evidence.hint.clone(),
            facts: drift.evidence.facts.clone(),
            first_seen: format_time(drift.since),
            fired_at: drift.fired_at.map(format_time),
            resolved_at: drift.resolved_at.map(format_time),
            resolution: drift.resolution.clone(),
            last_seen: format_time(notice.at),
            url: public_url
                .map(|base| format!("{}/ui/drifts/{}", base.trim_end_matches('/'), drift.id)),
            remediation: notice
                .remediation
                .as_deref()
                .map(|attempt| RemediationJson {
                    action: attempt.action.clone(),
                    outcome: attempt.outcome.as_str(),
                    mode: attempt.mode.clone(),
                    rule: attempt.rule.clone(),
                    approved_by: attempt.approved_by.clone(),
                    request: attempt
                        .request
                        .as_ref()
                        .map(|request| format!("{} {}", request.method, request.path)),
                    status: attempt.status,
                    reason: attempt.reason.clone(),
                    detail: attempt.detail.clone(),
                }),
        }
    }
}

impl WebhookBody {
    /// The body of a message with `notices`, sent at `now` under `notification_id`.
    pub fn new(
        notification_id: &str,
        notices: &[Notice],
        omitted: usize,
        now: Millis,
        public_url: Option<&str>,
    ) -> WebhookBody {
        let data: Vec<NoticeJson> = notices
            .iter()
            .map(|notice| NoticeJson::new(notice, public_url))
            .collect();
        let message_type = match (data.as_slice(), notices) {
            ([_], [notice]) if notice.kind == NoticeKind::Remediation => {
                "drift.remediation".to_string()
            }
            ([single], _) => format!("drift.{}", single.state),
            _ => "drift.digest".to_string(),
        };
        WebhookBody {
            message_type,
            timestamp: format_time(now),
            notification_id: notification_id.to_string(),
            omitted,
            data,
        }
    }
}
