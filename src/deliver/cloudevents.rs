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

/// Why a message cannot be made a CloudEvent: the delivery is rejected (never retried) with
/// this message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EventError {
    /// A message without a notice.
    #[error("empty message")]
    Empty,
    /// The SDK refuses the event's attributes.
    #[error("{0}")]
    Build(#[source] cloudevents::event::EventBuilderError),
}

impl EventError {
    /// A stable, bounded label.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the label a count of these failures would use; tested"
        )
    )]
    fn kind(&self) -> &'static str {
        match self {
            EventError::Empty => "empty_message",
            EventError::Build(_) => "build",
        }
    }
}

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
    pub(crate) fn event(&self, message: &Message) -> Result<cloudevents::Event, EventError> {
        let notice = message.notices.first().ok_or(EventError::Empty)?;
        let drift = &notice.drift;
        let ty = match notice.kind {
            NoticeKind::Resolved => "dev.driftsentinel.drift.resolved",
            NoticeKind::Remediation => "dev.driftsentinel.drift.remediation",
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
            .map_err(EventError::Build)
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
                Err(error) => {
                    return Outcome::Rejected {
                        detail: error.to_string(),
                    }
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_errors_have_stable_kinds_and_messages() {
        let channel = CloudEventsChannel::new(
            "ce",
            reqwest::Client::new(),
            Secret::new("http://broker.example".to_string()),
            None,
        );
        let empty = Message {
            id: "n-1".to_string(),
            notices: Vec::new(),
            now: 0,
            omitted: 0,
        };
        let error = channel.event(&empty).unwrap_err();
        assert_eq!(
            (error.kind(), error.to_string().as_str()),
            ("empty_message", "empty message")
        );
        // An event without an id, which the SDK refuses.
        let refused = EventBuilderV10::new().build().unwrap_err();
        let message = refused.to_string();
        let error = EventError::Build(refused);
        assert_eq!(error.kind(), "build");
        assert_eq!(error.to_string(), message);
    }
}
