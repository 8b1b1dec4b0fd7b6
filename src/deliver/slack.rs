//! The `slack` channel: Slack incoming webhooks with a `text` fallback and Block Kit.
//!
//! API: `POST https://hooks.slack.com/services/…` (api.slack.com/messaging/webhooks). Limits:
//! about one message a second (more gets `429` with `Retry-After`, which pauses the endpoint);
//! `header` ≤ 150 characters, `section.text` ≤ 3000, ≤ 10 fields of ≤ 2000, ≤ 50 blocks. Values
//! from the cluster are written as `render::Markup::Slack` says: `&`, `<` and `>` as entities
//! (Slack's documented escaping: no `<@U123>`, `<!channel>` or `<url|label>` of theirs), one line
//! each, no code fence and no `@channel`/`@here` of theirs. Answers: `200 ok` delivered; `400`/`403`/`404`/`410`
//! permanent (`invalid_payload`, `invalid_token`, `channel_not_found`, `no_service`, ...); `5xx`
//! transient.

use std::time::Duration;

use serde_json::{json, Value};

use super::http::{classify_status, read, retry_after, transport_error};
use super::render::{diff_lines, Markup, Placement, Style};
use super::{BoxFuture, Channel, Message, Outcome, RateWindow};
use drift_core::config::Secret;
use drift_model::NoticeKind;

fn cut_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A Slack webhook.
pub struct Slack {
    name: String,
    client: reqwest::Client,
    url: Secret,
    style: Style,
}

impl Slack {
    /// A Slack channel.
    pub fn new(name: &str, client: reqwest::Client, url: Secret, style: Style) -> Slack {
        Slack {
            name: name.to_string(),
            client,
            url,
            style,
        }
    }

    /// The request body.
    pub fn body(&self, message: &Message) -> Value {
        let style = &self.style;
        let mut blocks = vec![
            json!({"type": "header", "text": {"type": "plain_text", "text": cut_chars(&style.message_title(message), 150)}}),
        ];
        for notice in &message.notices {
            if blocks.len() >= 45 {
                break;
            }
            let drift = &notice.drift;
            let mut text = format!(
                "*{}*\n{}",
                style.title_in(notice, Markup::Slack),
                Markup::Slack.text(&drift.evidence.summary)
            );
            if let Some(link) = style.link(drift) {
                text.push_str(&format!("\n<{link}|drift-sentinel>"));
            }
            blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": cut_chars(&text, 3000)}}));
            if message.notices.len() == 1 {
                let fields: Vec<Value> = style
                    .fields(notice, Markup::Slack)
                    .into_iter()
                    .take(10)
                    .map(|(label, value)| json!({"type": "mrkdwn", "text": cut_chars(&format!("*{label}*\n{value}"), 2000)}))
                    .collect();
                blocks.push(json!({"type": "section", "fields": fields}));
                if !drift.evidence.changes.is_empty() && notice.kind != NoticeKind::Resolved {
                    let mut lines =
                        diff_lines(&drift.evidence.changes, 30, Markup::Slack, Placement::Code);
                    let mut code = lines.join("\n");
                    while code.chars().count() > 2900 && lines.len() > 1 {
                        let dropped = lines.len();
                        lines.truncate(lines.len() / 2);
                        code = format!(
                            "{}\n… {} more lines",
                            lines.join("\n"),
                            dropped - lines.len()
                        );
                    }
                    blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": format!("*{}*\n```{}```", style.label("changes"), cut_chars(&code, 2900))}}));
                }
                if let (Some(hint), true) =
                    (&drift.evidence.hint, notice.kind != NoticeKind::Resolved)
                {
                    blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": cut_chars(&format!("*{}*\n```{}```", style.label("hint"), Markup::Slack.code(hint)), 3000)}}));
                }
            }
        }
        if message.omitted > 0 {
            blocks.push(json!({"type": "context", "elements": [{"type": "mrkdwn", "text": format!("… {} {}", message.omitted, style.label("omitted"))}]}));
        }
        json!({"text": cut_chars(&style.plain(message, Markup::Slack), 3000), "blocks": blocks})
    }
}

impl Channel for Slack {
    fn name(&self) -> &str {
        &self.name
    }

    fn type_name(&self) -> &'static str {
        "slack"
    }

    fn rate_limits(&self) -> Vec<RateWindow> {
        vec![RateWindow {
            count: 1,
            window: Duration::from_secs(1),
        }]
    }

    fn send<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let response = match self
                .client
                .post(self.url.expose())
                .json(&self.body(message))
                .send()
                .await
            {
                Ok(response) => response,
                Err(error) => return transport_error(error),
            };
            let (status, headers, text) = read(response).await;
            if status.is_success() {
                return Outcome::Delivered;
            }
            if status.as_u16() == 429 {
                return Outcome::Throttled {
                    pause: retry_after(&headers).unwrap_or(Duration::from_secs(30)),
                    detail: format!("HTTP 429: {}", super::http::short(&text)),
                };
            }
            classify_status(status, &headers, &text)
        })
    }
}
