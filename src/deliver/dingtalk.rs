//! The `dingtalk` channel: DingTalk custom robot (自定义机器人), markdown messages.
//!
//! API: `POST https://oapi.dingtalk.com/robot/send?access_token=…` (help.dingtalk.io,
//! custom-robots-send-group-messages). With signing, `&timestamp=<ms>&sign=<url-encoded base64 of
//! HMAC-SHA256(key = secret, message = "<timestamp>\n<secret>")>`, computed per attempt. Limits:
//! 20 messages a minute per robot (more triggers a 10-minute lock-out), bodies under 20,000
//! bytes. Errors come inside HTTP 200 as `errcode`: `130101`/`410100` (or an `errmsg` saying
//! "too fast"/"限流") throttle for 10 minutes; `-1` is transient; `310000` about the timestamp or
//! signature is re-signed once, other `310000` (keyword, IP) and token/robot errors are permanent;
//! `460101` (too long) is resent once, shortened. `msgUuid` carries the notification id so a retry
//! after a lost response is not posted twice. Markdown subset: headings, quotes, bold, italic,
//! links, images, lists; values are made inert as `render::Markup::Markdown` says, and only the
//! configured `atMobiles`/`atUserIds` are mentioned (`isAtAll` is never set).

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

/// DingTalk's body cap.
pub(crate) const MAX_BODY_BYTES: usize = 20_000;
/// How long a throttled robot stays quiet.
pub(crate) const LOCKOUT: Duration = Duration::from_secs(600);

/// The raw (not URL-encoded) Base64 signature for `timestamp_ms`.
pub fn sign(secret: &str, timestamp_ms: i64) -> String {
    let string_to_sign = format!("{timestamp_ms}\n{secret}");
    // HMAC accepts keys of any length, so the error branch is unreachable; an empty signature
    // would only make DingTalk answer "sign not match", never crash the relay.
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(string_to_sign.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// What a DingTalk answer means.
pub fn classify(errcode: i64, errmsg: &str) -> Verdict {
    let lowered = errmsg.to_lowercase();
    if errcode == 0 {
        return Verdict::Delivered;
    }
    if errcode == 130101
        || errcode == 410100
        || lowered.contains("too fast")
        || errmsg.contains("限流")
    {
        return Verdict::Throttled;
    }
    match errcode {
        -1 => Verdict::Transient,
        310000 if lowered.contains("timestamp") || lowered.contains("sign") => Verdict::Resign,
        460101 | 101002 => Verdict::TooLong,
        310000
        | 300001
        | 300005
        | 400013
        | 400101
        | 400102
        | 400105
        | 400106
        | 430101..=430104
        | 90030 => Verdict::Permanent,
        // An unknown code may be new and transient; the attempt and age caps bound the retries.
        _ => Verdict::Transient,
    }
}

/// DingTalk outcome classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// `errcode == 0`.
    Delivered,
    /// Rate limited.
    Throttled,
    /// Retry later.
    Transient,
    /// Timestamp or signature: re-sign now, once.
    Resign,
    /// Body too long: shorten, once.
    TooLong,
    /// Configuration or content error.
    Permanent,
}

/// A DingTalk robot.
pub struct DingTalk {
    name: String,
    client: reqwest::Client,
    url: Secret,
    secret: Option<Secret>,
    at_mobiles: Vec<String>,
    at_user_ids: Vec<String>,
    keyword: Option<String>,
    style: Style,
    /// The relay's clock: a re-sign after `310000` takes a fresh time from it.
    clock: Clock,
}

impl DingTalk {
    /// A DingTalk channel.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: &str,
        client: reqwest::Client,
        url: Secret,
        secret: Option<Secret>,
        at_mobiles: Vec<String>,
        at_user_ids: Vec<String>,
        keyword: Option<String>,
        style: Style,
        clock: Clock,
    ) -> DingTalk {
        DingTalk {
            name: name.to_string(),
            client,
            url,
            secret,
            at_mobiles,
            at_user_ids,
            keyword,
            style,
            clock,
        }
    }

    /// The request body, under `max_bytes`.
    pub fn body(&self, message: &Message, max_bytes: usize) -> Value {
        let mut title = self.style.message_title(message);
        if let Some(keyword) = &self.keyword {
            if !title.contains(keyword.as_str()) {
                title = format!("{keyword} {title}");
            }
        }
        let mut text = self.style.markdown(message, false);
        if let Some(keyword) = &self.keyword {
            if !text.contains(keyword.as_str()) {
                text = format!("{keyword}\n\n{text}");
            }
        }
        // A mention only highlights when the text also carries `@<mobile>` / `@<userId>`.
        let mentions: Vec<String> = self
            .at_mobiles
            .iter()
            .chain(self.at_user_ids.iter())
            .map(|who| format!("@{who}"))
            .collect();
        let tail = if mentions.is_empty() {
            String::new()
        } else {
            format!("\n\n{}", mentions.join(" "))
        };
        let build = |text: &str| {
            json!({
                "msgtype": "markdown",
                "msgUuid": message.id,
                "markdown": {"title": title, "text": format!("{text}{tail}")},
                "at": {"atMobiles": self.at_mobiles, "atUserIds": self.at_user_ids, "isAtAll": false},
            })
        };
        let full = build(&text);
        let size = full.to_string().len();
        if size <= max_bytes {
            return full;
        }
        let note = format!("\n\n…（{}）", self.style.label("truncated"));
        let overhead = size - text.len() + note.len() + 64;
        let budget = max_bytes.saturating_sub(overhead);
        // JSON escaping can grow text; shrink until it fits.
        let mut keep = budget;
        loop {
            let candidate = format!("{}{note}", cut_bytes(&text, keep));
            let body = build(&candidate);
            if body.to_string().len() <= max_bytes || keep == 0 {
                return body;
            }
            keep = keep.saturating_sub(keep / 10 + 16);
        }
    }

    fn signed_url(&self, now_ms: i64) -> Result<reqwest::Url, Outcome> {
        let mut url = reqwest::Url::parse(self.url.expose()).map_err(|_| Outcome::Rejected {
            detail: "DingTalk URL is not valid".to_string(),
        })?;
        if let Some(secret) = &self.secret {
            // `append_pair` URL-encodes the Base64 (`+` → `%2B`); encoding it first would double it.
            url.query_pairs_mut()
                .append_pair("timestamp", &now_ms.to_string())
                .append_pair("sign", &sign(secret.expose(), now_ms));
        }
        Ok(url)
    }

    async fn post(&self, body: &Value, now_ms: i64) -> Result<(i64, String), Outcome> {
        let url = self.signed_url(now_ms)?;
        let response = self
            .client
            .post(url)
            .json(body)
            .send()
            .await
            .map_err(transport_error)?;
        let (status, headers, text) = read(response).await;
        if !status.is_success() {
            return Err(classify_status(status, &headers, &text));
        }
        let parsed: Value = serde_json::from_str(&text).map_err(|_| Outcome::Retry {
            after: None,
            detail: format!(
                "DingTalk answered HTTP 200 without JSON: {}",
                super::http::short(&text)
            ),
        })?;
        let errcode = parsed.get("errcode").and_then(Value::as_i64).unwrap_or(-1);
        let errmsg = parsed
            .get("errmsg")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        Ok((errcode, errmsg))
    }
}

impl Channel for DingTalk {
    fn name(&self) -> &str {
        &self.name
    }

    fn type_name(&self) -> &'static str {
        "dingtalk"
    }

    fn rate_limits(&self) -> Vec<RateWindow> {
        vec![RateWindow {
            count: 20,
            window: Duration::from_secs(60),
        }]
    }

    fn fit(&self, message: &Message) -> usize {
        super::notices_that_fit(message, MAX_BODY_BYTES, |candidate| {
            self.body(candidate, usize::MAX).to_string().len()
        })
    }

    fn send<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let mut body = self.body(message, MAX_BODY_BYTES);
            let mut now_ms = message.now;
            let mut resigned = false;
            let mut shortened = false;
            loop {
                let (errcode, errmsg) = match self.post(&body, now_ms).await {
                    Ok(answer) => answer,
                    Err(outcome) => return outcome,
                };
                let detail = format!("DingTalk errcode {errcode}: {errmsg}");
                match classify(errcode, &errmsg) {
                    Verdict::Delivered => return Outcome::Delivered,
                    Verdict::Throttled => {
                        return Outcome::Throttled {
                            pause: LOCKOUT,
                            detail,
                        }
                    }
                    Verdict::Transient => {
                        return Outcome::Retry {
                            after: None,
                            detail,
                        }
                    }
                    Verdict::Permanent => return Outcome::Rejected { detail },
                    Verdict::Resign if !resigned => {
                        resigned = true;
                        now_ms = (self.clock)();
                    }
                    Verdict::TooLong if !shortened => {
                        shortened = true;
                        body = self.body(message, MAX_BODY_BYTES / 4);
                    }
                    Verdict::Resign | Verdict::TooLong => return Outcome::Rejected { detail },
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_vectors() {
        assert_eq!(
            sign("this is secret", 1577836800000),
            "fFV9t5lBS7KH4+5B0JjR99ab+AJkXFauQXycgTkS/tc="
        );
        assert_eq!(
            sign(
                "SEC0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd",
                1700000000000
            ),
            "8SZas7RY4E7wuOlgLfjLwHSKZpyUEdXdLvFYSDZiiFw="
        );
    }

    #[test]
    fn signed_url_encodes_once() {
        let channel = DingTalk::new(
            "d",
            reqwest::Client::new(),
            Secret::new("https://oapi.dingtalk.com/robot/send?access_token=t"),
            Some(Secret::new("this is secret")),
            vec![],
            vec![],
            None,
            Style::english(),
            std::sync::Arc::new(|| 0),
        );
        let url = channel.signed_url(1577836800000).unwrap();
        assert!(url.as_str().ends_with("&timestamp=1577836800000&sign=fFV9t5lBS7KH4%2B5B0JjR99ab%2BAJkXFauQXycgTkS%2Ftc%3D"), "{url}");
    }

    #[test]
    fn errcodes() {
        assert_eq!(classify(0, "ok"), Verdict::Delivered);
        assert_eq!(
            classify(130101, "send too fast, exceed 20 times per minute"),
            Verdict::Throttled
        );
        assert_eq!(classify(410100, "发送速度太快而限流"), Verdict::Throttled);
        assert_eq!(classify(310000, "sign not match"), Verdict::Resign);
        assert_eq!(classify(310000, "invalid timestamp"), Verdict::Resign);
        assert_eq!(
            classify(310000, "keywords not in content"),
            Verdict::Permanent
        );
        assert_eq!(classify(300001, "token is not exist"), Verdict::Permanent);
        assert_eq!(classify(-1, "系统繁忙"), Verdict::Transient);
        assert_eq!(
            classify(460101, "message too long, exceed 20000 bytes"),
            Verdict::TooLong
        );
    }
}
