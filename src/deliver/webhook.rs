//! The `webhook` channel: the drift record as JSON, signed with Standard Webhooks headers
//! (`webhook-id`, `webhook-timestamp`, `webhook-signature`; `standard-webhooks` spec v1.0.0).
//!
//! The JSON is a public contract (README, "Webhook JSON"; `wire::notice`). `webhook-id` is the notification id,
//! the same on every retry, so receivers de-duplicate; the timestamp and signature are computed
//! per attempt. Responses follow the spec's sender etiquette: 2xx delivered; `429`, `502`, `504`
//! and `503` retried (honouring `Retry-After`); `410 Gone` and other 4xx and 3xx permanent.

use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::http::{classify_status, read, transport_error};
use super::{BoxFuture, Channel, Message, Outcome};
use drift_core::config::Secret;
use drift_model::wire::notice::WebhookBody;

/// The body of a webhook message: the public JSON of [`drift_model::wire::notice::WebhookBody`], its
/// keys in sorted order as serde_json writes a map.
pub fn body(message: &Message, public_url: Option<&str>) -> Value {
    let body = WebhookBody::new(
        &message.id,
        &message.notices,
        message.omitted,
        message.now,
        public_url,
    );
    serde_json::to_value(body).unwrap_or(Value::Null)
}

/// `v1,<base64>` for Standard Webhooks, or `None` for a malformed secret.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let key = base64::engine::general_purpose::STANDARD
        .decode(secret.strip_prefix("whsec_")?)
        .ok()?;
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&key).ok()?;
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    Some(format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// The webhook channel.
pub struct Webhook {
    name: String,
    client: reqwest::Client,
    url: Secret,
    secret: Option<Secret>,
    public_url: Option<String>,
}

impl Webhook {
    /// A webhook channel.
    pub fn new(
        name: &str,
        client: reqwest::Client,
        url: Secret,
        secret: Option<Secret>,
        public_url: Option<&str>,
    ) -> Webhook {
        Webhook {
            name: name.to_string(),
            client,
            url,
            secret,
            public_url: public_url.map(str::to_string),
        }
    }
}

impl Channel for Webhook {
    fn name(&self) -> &str {
        &self.name
    }

    fn type_name(&self) -> &'static str {
        "webhook"
    }

    fn max_notices(&self) -> usize {
        50
    }

    fn send<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let body = match serde_json::to_vec(&body(message, self.public_url.as_deref())) {
                Ok(body) => body,
                Err(error) => {
                    return Outcome::Rejected {
                        detail: format!("cannot encode body: {error}"),
                    }
                }
            };
            let timestamp = message.now / 1000;
            let mut request = self
                .client
                .post(self.url.expose())
                .header("content-type", "application/json")
                .header("webhook-id", &message.id)
                .header("webhook-timestamp", timestamp.to_string());
            if let Some(secret) = &self.secret {
                match sign(secret.expose(), &message.id, timestamp, &body) {
                    Some(signature) => request = request.header("webhook-signature", signature),
                    None => {
                        return Outcome::Rejected {
                            detail: "webhook secret is not whsec_<base64>".to_string(),
                        }
                    }
                }
            }
            let response = match request.body(body).send().await {
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
    fn standard_webhooks_vectors() {
        assert_eq!(
            sign(
                "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
                "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
                1649367553,
                br#"{"email":"test@example.com","username":"test_user"}"#
            )
            .unwrap(),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        );
        assert_eq!(
            sign("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "msg_alert_0001", 1704067200,
                 br#"{"type":"alert.firing","timestamp":"2024-01-01T00:00:00Z","data":{"alertname":"HighLatency","severity":"critical"}}"#).unwrap(),
            "v1,Q+Kgaros6tFNhHX0/UcDYCYaCXaBabBnReA3xmcmnUA="
        );
        assert!(sign("nope", "a", 1, b"").is_none());
    }
}
