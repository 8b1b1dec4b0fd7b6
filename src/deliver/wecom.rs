//! The `wecom` channel: WeCom (企业微信) group robot, markdown messages.
//!
//! API: `POST https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=<key>` (work.weixin.qq.com
//! doc 91770); no signing: the `key` is the credential. Limits: 20 messages a minute per robot;
//! markdown content ≤ 4096 bytes (cut on a character boundary with a note). Answers are HTTP 200
//! with `errcode`: `0` delivered; `45009` throttled; `-1` transient; `93000` (invalid webhook URL)
//! permanent; `40058` (content too long) resent once, shorter. Markdown: headings, bold, links,
//! quotes, inline code, `<font color="info|comment|warning">` and `<@userid>` mentions; values
//! are made inert as `render::Markup::Markdown` says (no tag, link, mention or heading of theirs).

use std::time::Duration;

use serde_json::{json, Value};

use super::http::{classify_status, cut_bytes, read, transport_error};
use super::render::{Markup, Style};
use super::{BoxFuture, Channel, Message, Outcome, RateWindow};
use drift_core::config::Secret;
use drift_model::NoticeKind;

/// WeCom's markdown content cap.
pub(crate) const MAX_CONTENT_BYTES: usize = 4096;

/// A WeCom robot.
pub struct WeCom {
    name: String,
    client: reqwest::Client,
    url: Secret,
    style: Style,
}

impl WeCom {
    /// A WeCom channel.
    pub fn new(name: &str, client: reqwest::Client, url: Secret, style: Style) -> WeCom {
        WeCom {
            name: name.to_string(),
            client,
            url,
            style,
        }
    }

    /// The request body with content at most `max_bytes`.
    pub fn body(&self, message: &Message, max_bytes: usize) -> Value {
        // The title goes inside WeCom's markdown (its `<font>` tag), so its values are written as
        // Markdown.
        let title = self.style.message_title_in(message, Markup::Markdown);
        // From the notices, never from the title: a cluster value in it could read "RESOLVED".
        let colour = if message
            .notices
            .iter()
            .all(|notice| notice.kind == NoticeKind::Resolved)
        {
            "info"
        } else {
            "warning"
        };
        let content = format!(
            "<font color=\"{colour}\">{title}</font>\n{}",
            self.style.markdown(message, false)
        );
        let content = if content.len() <= max_bytes {
            content
        } else {
            let note = format!("\n…（{}）", self.style.label("truncated"));
            format!(
                "{}{note}",
                cut_bytes(&content, max_bytes.saturating_sub(note.len()))
            )
        };
        json!({"msgtype": "markdown", "markdown": {"content": content}})
    }
}

impl Channel for WeCom {
    fn name(&self) -> &str {
        &self.name
    }

    fn type_name(&self) -> &'static str {
        "wecom"
    }

    fn rate_limits(&self) -> Vec<RateWindow> {
        vec![RateWindow {
            count: 20,
            window: Duration::from_secs(60),
        }]
    }

    fn max_notices(&self) -> usize {
        8
    }

    fn fit(&self, message: &Message) -> usize {
        super::notices_that_fit(message, MAX_CONTENT_BYTES, |candidate| {
            self.body(candidate, usize::MAX)["markdown"]["content"]
                .as_str()
                .map_or(0, str::len)
        })
    }

    fn send<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let mut limit = MAX_CONTENT_BYTES;
            let mut shortened = false;
            loop {
                let response = match self
                    .client
                    .post(self.url.expose())
                    .json(&self.body(message, limit))
                    .send()
                    .await
                {
                    Ok(response) => response,
                    Err(error) => return transport_error(error),
                };
                let (status, headers, text) = read(response).await;
                if !status.is_success() {
                    return classify_status(status, &headers, &text);
                }
                let parsed: Value = match serde_json::from_str(&text) {
                    Ok(parsed) => parsed,
                    Err(_) => {
                        return Outcome::Retry {
                            after: None,
                            detail: format!(
                                "WeCom answered without JSON: {}",
                                super::http::short(&text)
                            ),
                        }
                    }
                };
                let errcode = parsed.get("errcode").and_then(Value::as_i64).unwrap_or(-1);
                let errmsg = parsed
                    .get("errmsg")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let detail = format!("WeCom errcode {errcode}: {errmsg}");
                match errcode {
                    0 => return Outcome::Delivered,
                    45009 => {
                        return Outcome::Throttled {
                            pause: Duration::from_secs(60),
                            detail,
                        }
                    }
                    40058 if !shortened => {
                        shortened = true;
                        limit = MAX_CONTENT_BYTES / 2;
                    }
                    93000 | 40058 | 40008 => return Outcome::Rejected { detail },
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

    fn colour_of(kind: NoticeKind, name: &str) -> String {
        let mut notice = crate::deliver::render::tests::notice();
        notice.kind = kind;
        notice.drift.name = name.to_string();
        let channel = WeCom::new(
            "wx",
            reqwest::Client::new(),
            Secret::new("https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k".to_string()),
            Style::english(),
        );
        let message = Message {
            id: "m".into(),
            notices: vec![notice],
            now: 0,
            omitted: 0,
        };
        let body = channel.body(&message, 4096);
        let content = body["markdown"]["content"].as_str().unwrap().to_string();
        content.split('"').nth(1).unwrap_or_default().to_string()
    }

    #[test]
    fn the_colour_follows_the_notices_not_the_values_in_the_title() {
        assert_eq!(colour_of(NoticeKind::Resolved, "checkout"), "info");
        assert_eq!(colour_of(NoticeKind::Firing, "checkout"), "warning");
        // Found in review: a firing alert for an object named like a resolve looked resolved.
        assert_eq!(colour_of(NoticeKind::Firing, "RESOLVED-已恢复"), "warning");
    }
}
