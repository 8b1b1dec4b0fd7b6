//! Deliver: outbox rows → messages on the wire, one module per destination behind one
//! [`Channel`] trait. Only this module knows reqwest and vendor payloads.
//!
//! A [`relay::Relay`] per channel endpoint takes due rows from the outbox, merges rows due
//! together into one message (a digest), respects the destination's rate limits, sends, and
//! settles every row in exactly one terminal state: `delivered`, `rejected` (a permanent error)
//! or `expired` (attempt or age cap). A retry is a row update with a later `next_attempt_at`,
//! never an in-process sleep, so a restart loses nothing; signatures and timestamps are computed
//! per attempt. Each channel classifies its destination's answers once, including the errors that
//! Chinese IM bots report inside HTTP 200.

pub mod alertmanager;
pub mod cloudevents;
pub mod dingtalk;
pub mod feishu;
pub mod http;
pub mod log;
pub mod ratelimit;
pub mod relay;
pub mod render;
pub mod slack;
pub mod webhook;
pub mod wecom;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use drift_core::config::{ChannelConfig, ChannelKind};
use drift_model::class::ClassCatalog;
use drift_model::time::Clock;
use drift_model::Millis;
use drift_model::Notice;

/// A boxed future, so channels can live behind `Arc<dyn Channel>`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One message: one or more notices (a digest) under one idempotency key.
#[derive(Debug, Clone)]
pub struct Message {
    /// Stable across retries: DingTalk `msgUuid`, `webhook-id`, CloudEvent `id`.
    pub id: String,
    /// What to say, oldest first.
    pub notices: Vec<Notice>,
    /// The attempt's time (signatures, `endsAt`).
    pub now: Millis,
    /// Notices left out of this message because of size (said in the message).
    pub omitted: usize,
}

/// What a destination made of a message.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Accepted.
    Delivered,
    /// A transient failure: retry later (at least `after`, if the destination said so).
    Retry {
        /// The destination's `Retry-After`, if any.
        after: Option<Duration>,
        /// What happened (no URL, no secret).
        detail: String,
    },
    /// The destination is rate-limiting this endpoint: pause it entirely.
    Throttled {
        /// How long to pause.
        pause: Duration,
        /// What happened.
        detail: String,
    },
    /// A permanent error: retrying cannot help.
    Rejected {
        /// What happened.
        detail: String,
    },
}

impl Outcome {
    /// A bounded label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Delivered => "delivered",
            Outcome::Retry { .. } => "retried",
            Outcome::Throttled { .. } => "throttled",
            Outcome::Rejected { .. } => "rejected",
        }
    }
}

/// A sliding-window rate limit: at most `count` messages in any `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateWindow {
    /// Messages allowed.
    pub count: usize,
    /// Window length.
    pub window: Duration,
}

/// One destination endpoint.
pub trait Channel: Send + Sync {
    /// The endpoint name (`name`, or `name#index`).
    fn name(&self) -> &str;
    /// The channel type (`dingtalk`, ...), a bounded metric label.
    fn type_name(&self) -> &'static str;
    /// The destination's documented rate limits.
    fn rate_limits(&self) -> Vec<RateWindow> {
        Vec::new()
    }
    /// Most notices merged into one message.
    fn max_notices(&self) -> usize {
        20
    }
    /// How many of the message's leading notices the destination can show whole (at least one);
    /// the relay keeps the rest for the next message instead of letting them be cut off.
    fn fit(&self, message: &Message) -> usize {
        message.notices.len()
    }
    /// For destinations that need firing alerts re-sent (Alertmanager): the interval.
    fn resend_interval(&self) -> Option<Duration> {
        None
    }
    /// Sends one message.
    fn send<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Outcome>;
}

/// Builds every channel endpoint from the config (Alertmanager expands to one per URL); the
/// messages name classes from `classes`.
pub fn build_channels(
    channels: &[ChannelConfig],
    public_url: Option<&str>,
    classes: &ClassCatalog,
    clock: Clock,
) -> Result<Vec<Arc<dyn Channel>>, reqwest::Error> {
    let mut built: Vec<Arc<dyn Channel>> = Vec::new();
    for config in channels {
        let client = http::client(config.timeout)?;
        let style = render::Style::new(config, public_url, classes);
        match &config.kind {
            ChannelKind::Log {} => built.push(Arc::new(log::LogChannel::new(&config.name, style))),
            ChannelKind::Dingtalk {
                url,
                secret,
                at_mobiles,
                at_user_ids,
                keyword,
            } => built.push(Arc::new(dingtalk::DingTalk::new(
                &config.name,
                client,
                url.clone(),
                secret.clone(),
                at_mobiles.clone(),
                at_user_ids.clone(),
                keyword.clone(),
                style,
                clock.clone(),
            ))),
            ChannelKind::Slack { url } => built.push(Arc::new(slack::Slack::new(
                &config.name,
                client,
                url.clone(),
                style,
            ))),
            ChannelKind::Feishu { url, secret } => built.push(Arc::new(feishu::Feishu::new(
                &config.name,
                client,
                url.clone(),
                secret.clone(),
                style,
                clock.clone(),
            ))),
            ChannelKind::Wecom { url } => built.push(Arc::new(wecom::WeCom::new(
                &config.name,
                client,
                url.clone(),
                style,
            ))),
            ChannelKind::Webhook { url, secret } => built.push(Arc::new(webhook::Webhook::new(
                &config.name,
                client,
                url.clone(),
                secret.clone(),
                public_url,
            ))),
            ChannelKind::Alertmanager {
                urls,
                resend_interval,
            } => {
                for (index, url) in urls.iter().enumerate() {
                    let name = if urls.len() > 1 {
                        format!("{}#{index}", config.name)
                    } else {
                        config.name.clone()
                    };
                    built.push(Arc::new(alertmanager::Alertmanager::new(
                        &name,
                        client.clone(),
                        url.clone(),
                        *resend_interval,
                        public_url,
                    )));
                }
            }
            ChannelKind::Cloudevents { url } => built.push(Arc::new(
                cloudevents::CloudEventsChannel::new(&config.name, client, url.clone(), public_url),
            )),
        }
    }
    Ok(built)
}

/// How many leading notices of `message` fit whole under `cap` bytes, as measured by `size`
/// (the rest of the message said as "N more").
pub(crate) fn notices_that_fit(
    message: &Message,
    cap: usize,
    size: impl Fn(&Message) -> usize,
) -> usize {
    let total = message.notices.len();
    for count in (1..=total).rev() {
        let candidate = Message {
            id: message.id.clone(),
            notices: message.notices[..count].to_vec(),
            now: message.now,
            omitted: message.omitted + (total - count),
        };
        if size(&candidate) <= cap {
            return count;
        }
    }
    1
}
