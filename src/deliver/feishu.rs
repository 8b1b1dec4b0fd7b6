//! The `feishu` channel: Feishu / Lark custom bot (自定义机器人), interactive card messages.
//!
//! API: `POST https://open.feishu.cn/open-apis/bot/v2/hook/<token>`. Signing (when the bot has a
//! secret): `timestamp` in **seconds** and `sign` = Base64(HMAC-SHA256 with key =
//! `"<timestamp>\n<secret>"` over an empty message), both in the JSON body, computed per attempt.
//! Limits: 5 requests a second and 100 a minute per bot; bodies ≤ 20 KB. Answers carry `code`
//! (0 = delivered) whatever the HTTP status: `11232` throttled; `19021` (signature or timestamp)
//! re-signed once; `19022` (IP), `19024` (keyword), `9499` (bad request) permanent. The card's
//! `lark_md` reads Markdown plus `<at …>` mentions and `<font>`; values are made inert as
//! `render::Markup::Markdown` says, in the diff's and the hint's code blocks too (an image name
//! cannot close them).

use std::time::Duration;

use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use super::http::{classify_status, cut_bytes, read, transport_error};
use super::render::Style;
use super::{BoxFuture, Channel, Message, Outcome, RateWindow};
use drift_core::config::Secret;
use drift_model::time::Clock;
use drift_model::NoticeKind;

/// Feishu's documented body cap.
pub(crate) const MAX_BODY_BYTES: usize = 20_000;

/// `sign` for `timestamp_s`.
pub fn sign(secret: &str, timestamp_s: i64) -> String {
    let key = format!("{timestamp_s}\n{secret}");
    // HMAC accepts keys of any length; the error branch is unreachable.
    let Ok(mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(key.as_bytes()) else {
        return String::new();
    };
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// A Feishu bot.
pub struct Feishu {
    name: String,
    client: reqwest::Client,
    url: Secret,
    secret: Option<Secret>,
    style: Style,
    /// The relay's clock: a re-sign after `19021` takes a fresh time from it.
    clock: Clock,
}

impl Feishu {
    /// A Feishu channel.
    pub fn new(
        name: &str,
        client: reqwest::Client,
        url: Secret,
        secret: Option<Secret>,
        style: Style,
        clock: Clock,
    ) -> Feishu {
        Feishu {
            name: name.to_string(),
            client,
            url,
            secret,
            style,
            clock,
        }
    }

    /// The request body for an attempt at `timestamp_s`.
    pub fn body(&self, message: &Message, timestamp_s: i64) -> Value {
        self.body_within(message, timestamp_s, MAX_BODY_BYTES)
    }

    /// The request body, cut to `max_bytes` if needed.
    pub(crate) fn body_within(
        &self,
        message: &Message,
        timestamp_s: i64,
        max_bytes: usize,
    ) -> Value {
        let colour = if message
            .notices
            .iter()
            .all(|notice| notice.kind == NoticeKind::Resolved)
        {
            "green"
        } else if message
            .notices
            .iter()
            .any(|notice| notice.drift.severity.as_str() == "critical")
        {
            "red"
        } else {
            "orange"
        };
        let build = |content: &str| {
            let mut body = json!({
                "msg_type": "interactive",
                "card": {
                    "header": {"title": {"tag": "plain_text", "content": self.style.message_title(message)}, "template": colour},
                    "elements": [{"tag": "div", "text": {"tag": "lark_md", "content": content}}],
                },
            });
            if let Some(secret) = &self.secret {
                body["timestamp"] = json!(timestamp_s.to_string());
                body["sign"] = json!(sign(secret.expose(), timestamp_s));
            }
            body
        };
        let content = self.style.markdown(message, true);
        let full = build(&content);
        if full.to_string().len() <= max_bytes {
            return full;
        }
        let note = format!("\n\n…（{}）", self.style.label("truncated"));
        let mut keep =
            max_bytes.saturating_sub(full.to_string().len() - content.len() + note.len() + 64);
        loop {
            let body = build(&format!("{}{note}", cut_bytes(&content, keep)));
            if body.to_string().len() <= max_bytes || keep == 0 {
                return body;
            }
            keep = keep.saturating_sub(keep / 10 + 16);
        }
    }
}

impl Channel for Feishu {
    fn name(&self) -> &str {
        &self.name
    }

    fn type_name(&self) -> &'static str {
        "feishu"
    }

    fn rate_limits(&self) -> Vec<RateWindow> {
        vec![
            RateWindow {
                count: 5,
                window: Duration::from_secs(1),
            },
            RateWindow {
                count: 100,
                window: Duration::from_secs(60),
            },
        ]
    }

    fn fit(&self, message: &Message) -> usize {
        super::notices_that_fit(message, MAX_BODY_BYTES, |candidate| {
            self.body_within(candidate, 0, usize::MAX).to_string().len()
        })
    }

    fn send<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let mut timestamp_s = message.now / 1000;
            let mut resigned = false;
            loop {
                let body = self.body(message, timestamp_s);
                let response = match self.client.post(self.url.expose()).json(&body).send().await {
                    Ok(response) => response,
                    Err(error) => return transport_error(error),
                };
                let (status, headers, text) = read(response).await;
                let parsed: Option<Value> = serde_json::from_str(&text).ok();
                // Legacy answers carry `StatusCode` instead of `code`.
                let code = parsed.as_ref().and_then(|value| {
                    value
                        .get("code")
                        .or_else(|| value.get("StatusCode"))
                        .and_then(Value::as_i64)
                });
                let Some(code) = code else {
                    return if status.is_success() {
                        Outcome::Retry {
                            after: None,
                            detail: format!(
                                "Feishu answered without a code: {}",
                                super::http::short(&text)
                            ),
                        }
                    } else {
                        classify_status(status, &headers, &text)
                    };
                };
                let msg = parsed
                    .as_ref()
                    .and_then(|value| {
                        value
                            .get("msg")
                            .or_else(|| value.get("StatusMessage"))
                            .and_then(Value::as_str)
                    })
                    .unwrap_or_default();
                let detail = format!("Feishu code {code}: {msg}");
                match code {
                    0 => return Outcome::Delivered,
                    11232 => {
                        return Outcome::Throttled {
                            pause: Duration::from_secs(60),
                            detail,
                        }
                    }
                    19021 if !resigned => {
                        resigned = true;
                        timestamp_s = (self.clock)() / 1000;
                    }
                    19021 | 19022 | 19024 | 9499 | 19036 => return Outcome::Rejected { detail },
                    _ if status.is_server_error() => {
                        return Outcome::Retry {
                            after: None,
                            detail,
                        }
                    }
                    _ => {
                        return Outcome::Retry {
                            after: None,
                            detail,
                        }
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_vector() {
        assert_eq!(
            sign("demo_secret_1234", 1700000000),
            "ao2o4Zb7vDjCMDmlYxs7k6p9m0MZHjpxvh7/knGrA9c="
        );
    }
}
