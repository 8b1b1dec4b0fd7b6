//! The `cloudevents` channel: each notice as a typed CloudEvent
//! (`dev.driftsentinel.drift.firing` / `dev.driftsentinel.drift.resolved`, data = the webhook
//! JSON) in binary mode to a Broker ingress, so audit and remediation pipelines subscribe with
//! Triggers. The CloudEvent `id` is the notification id, stable across retries, so the Broker's
//! subscribers can de-duplicate. A reminder is sent as `firing` again.

use cloudevents::binding::reqwest::RequestBuilderExt;
use cloudevents::{EventBuilder, EventBuilderV10};

use super::http::{classify_status, read, transport_error};
use super::{BoxFuture, Channel, Message, Outcome};
use drift_core::config::Secret;
use drift_model::wire::notice::NoticeJson;
use drift_model::NoticeKind;

/// A CloudEvents sink.
pub(crate) struct CloudEventsChannel {
    name: String,
    client: reqwest::Client,
    url: Secret,
    public_url: Option<String>,
}

impl CloudEventsChannel {
    /// A CloudEvents channel.
    pub(crate) fn new(
        name: &str,
        client: reqwest::Client,
        url: Secret,
        public_url: Option<&str>,
    ) -> CloudEventsChannel {
        CloudEventsChannel {
            name: name.to_string(),
            client,
            url,
            public_url: public_url.map(str::to_string),
        }
    }

    /// The CloudEvent for a one-notice message.
    pub(crate) fn event(&self, message: &Message) -> Result<cloudevents::Event, String> {
        let notice = message.notices.first().ok_or("empty message")?;
        let drift = &notice.drift;
        let ty = match notice.kind {
            NoticeKind::Resolved => "dev.driftsentinel.drift.resolved",
            _ => "dev.driftsentinel.drift.firing",
        };
        EventBuilderV10::new()
            .id(message.id.clone())
            .source(format!("/drift-sentinel/{}", drift.cluster))
            .ty(ty)
            .subject(format!("{}/{}/{}", drift.kind, drift.namespace, drift.name))
            .time(chrono::DateTime::from_timestamp_millis(message.now).unwrap_or_default())
            .extension("driftclass", drift.class.clone())
            .extension("driftseverity", drift.severity.as_str())
            .data(
                "application/json",
                serde_json::to_value(NoticeJson::new(notice, self.public_url.as_deref()))
                    .unwrap_or(serde_json::Value::Null),
            )
            .build()
            .map_err(|error| error.to_string())
    }
}

impl Channel for CloudEventsChannel {
    fn name(&self) -> &str {
        &self.name
    }

    fn type_name(&self) -> &'static str {
        "cloudevents"
    }

    fn max_notices(&self) -> usize {
        // One CloudEvent per drift: Triggers filter on attributes of single events.
        1
    }

    fn send<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let event = match self.event(message) {
                Ok(event) => event,
                Err(detail) => return Outcome::Rejected { detail },
            };
            let request = match self.client.post(self.url.expose()).event(event) {
                Ok(request) => request,
                Err(error) => {
                    return Outcome::Rejected {
                        detail: format!("cannot encode CloudEvent: {error}"),
                    }
                }
            };
            let response = match request.send().await {
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
