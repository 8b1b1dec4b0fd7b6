//! The `alertmanager` channel: Prometheus Alertmanager `POST /api/v2/alerts`, as Prometheus
//! itself is a client (`docs/alerts_api.md`).
//!
//! Labels are stable identity (`alertname="KnativeDrift"`, `drift_class`, `severity`, `cluster`,
//! `namespace`, `kind`, `name`, `service`); diff, actor and hint go in annotations, so a changing
//! diff never becomes a new alert. Alertmanager keeps alerts in memory only and expects clients to
//! resend: firing alerts are re-sent every `resendInterval` with `endsAt` four intervals ahead (so
//! two lost resends do not resolve them), and after an Alertmanager restart the next resend
//! restores them. A resolve re-posts the same labels with `endsAt` = the resolution time, and is
//! repeated for a few intervals in case an instance restarted meanwhile. Each instance of an HA
//! pair is its own endpoint. Answers: `200` delivered; `400` permanent (invalid alerts; valid
//! ones in the batch were stored); `5xx` and connection errors transient.

use std::time::Duration;

use serde_json::{json, Value};

use super::http::{classify_status, read, transport_error};
use super::render::{diff_lines, Markup, Placement};
use super::{BoxFuture, Channel, Message, Outcome};
use drift_core::config::Secret;
use drift_model::text::actor_text;
use drift_model::time::format_time;
use drift_model::NoticeKind;

/// An Alertmanager instance.
pub struct Alertmanager {
    name: String,
    client: reqwest::Client,
    url: Secret,
    resend_interval: Duration,
    public_url: Option<String>,
}

impl Alertmanager {
    /// An Alertmanager endpoint.
    pub fn new(
        name: &str,
        client: reqwest::Client,
        url: Secret,
        resend_interval: Duration,
        public_url: Option<&str>,
    ) -> Alertmanager {
        Alertmanager {
            name: name.to_string(),
            client,
            url,
            resend_interval,
            public_url: public_url.map(|url| url.trim_end_matches('/').to_string()),
        }
    }

    /// The alerts of a message.
    pub fn alerts(&self, message: &Message) -> Value {
        let ahead = i64::try_from(self.resend_interval.as_millis()).unwrap_or(60_000) * 4;
        let alerts: Vec<Value> = message
            .notices
            .iter()
            .map(|notice| {
                let drift = &notice.drift;
                let mut labels = serde_json::Map::new();
                for (key, value) in [
                    ("alertname", "KnativeDrift".to_string()),
                    ("drift_class", drift.class.clone()),
                    ("severity", drift.severity.as_str().to_string()),
                    ("cluster", drift.cluster.clone()),
                    ("namespace", drift.namespace.clone()),
                    ("kind", drift.kind.clone()),
                    ("name", drift.name.clone()),
                    ("service", drift.owner.service.clone().unwrap_or_default()),
                ] {
                    // Alertmanager drops empty values anyway; leaving them out keeps identity stable.
                    if !value.is_empty() {
                        labels.insert(key.to_string(), Value::String(value));
                    }
                }
                let starts = drift.fired_at.unwrap_or(drift.since);
                let ends = match notice.kind {
                    NoticeKind::Resolved => drift
                        .resolved_at
                        .unwrap_or(message.now)
                        .min(message.now)
                        .max(starts),
                    _ => message.now + ahead,
                };
                let mut annotations = json!({
                    "summary": drift.evidence.summary,
                    "drift_id": drift.id,
                });
                if !drift.evidence.changes.is_empty() {
                    annotations["diff"] = json!(diff_lines(
                        &drift.evidence.changes,
                        20,
                        Markup::Plain,
                        Placement::Text
                    )
                    .join("\n"));
                }
                if let Some(actor) = actor_text(drift) {
                    annotations["actor"] = json!(actor);
                }
                if let Some(hint) = &drift.evidence.hint {
                    annotations["hint"] = json!(hint);
                }
                let mut alert = json!({
                    "labels": labels,
                    "annotations": annotations,
                    "startsAt": format_time(starts),
                    "endsAt": format_time(ends),
                });
                if let Some(base) = &self.public_url {
                    alert["generatorURL"] = json!(format!("{base}/ui/drifts/{}", drift.id));
                }
                alert
            })
            .collect();
        Value::Array(alerts)
    }
}

impl Channel for Alertmanager {
    fn name(&self) -> &str {
        &self.name
    }

    fn type_name(&self) -> &'static str {
        "alertmanager"
    }

    fn max_notices(&self) -> usize {
        100
    }

    fn resend_interval(&self) -> Option<Duration> {
        Some(self.resend_interval)
    }

    fn send<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let url = format!("{}/api/v2/alerts", self.url.expose().trim_end_matches('/'));
            let response = match self
                .client
                .post(url)
                .json(&self.alerts(message))
                .send()
                .await
            {
                Ok(response) => response,
                Err(error) => return transport_error(error),
            };
            let (status, headers, text) = read(response).await;
            if status.is_success() {
                Outcome::Delivered
            } else {
                classify_status(status, &headers, &text)
            }
        })
    }
}
