//! `channels:`: one entry per destination, its type's own settings and the delivery settings
//! every type shares.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::{de_duration, Secret};

/// One alert channel: a name, a `type`, the type's own settings, and delivery settings.
#[derive(Debug, Clone)]
pub struct ChannelConfig {
    /// Name that routes refer to.
    pub name: String,
    /// The destination and its settings.
    pub kind: ChannelKind,
    /// Message language for built-in templates: `en` or `zh`.
    pub language: Language,
    /// Optional template overrides with `{{variable}}` placeholders (see the README).
    pub templates: TemplateConfig,
    /// Per-attempt HTTP timeout.
    pub timeout: Duration,
    /// Attempts before a delivery expires.
    pub max_attempts: u32,
    /// Age after which an undelivered notification expires.
    pub max_age: Duration,
    /// First retry delay; doubles per attempt (with jitter) up to `maxBackoff`.
    pub min_backoff: Duration,
    /// Longest retry delay.
    pub max_backoff: Duration,
    /// A `language` other than `en` and `zh`, as written: validation refuses it, naming its key
    /// (`language` itself is then the default, and never read).
    pub(super) unknown_language: Option<String>,
}

/// The settings every channel type shares.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CommonChannelFields {
    name: String,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    templates: TemplateConfig,
    #[serde(default = "default_send_timeout", deserialize_with = "de_duration")]
    timeout: Duration,
    #[serde(default = "default_max_attempts")]
    max_attempts: u32,
    #[serde(default = "default_max_age", deserialize_with = "de_duration")]
    max_age: Duration,
    #[serde(default = "default_min_backoff", deserialize_with = "de_duration")]
    min_backoff: Duration,
    #[serde(default = "default_max_backoff", deserialize_with = "de_duration")]
    max_backoff: Duration,
}

const COMMON_CHANNEL_KEYS: &[&str] = &[
    "name",
    "language",
    "templates",
    "timeout",
    "maxAttempts",
    "maxAge",
    "minBackoff",
    "maxBackoff",
];

impl<'de> Deserialize<'de> for ChannelConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Shared keys and type-specific keys are checked separately so a typo in either is an
        // error (serde cannot combine `flatten` with `deny_unknown_fields`).
        let map = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
        let (common, specific): (serde_json::Map<_, _>, serde_json::Map<_, _>) = map
            .into_iter()
            .partition(|(key, _)| COMMON_CHANNEL_KEYS.contains(&key.as_str()));
        let common: CommonChannelFields = serde_json::from_value(serde_json::Value::Object(common))
            .map_err(serde::de::Error::custom)?;
        let kind: ChannelKind = serde_json::from_value(serde_json::Value::Object(specific))
            .map_err(serde::de::Error::custom)?;
        let (language, unknown_language) = match common.language.as_deref() {
            None | Some("en") => (Language::En, None),
            Some("zh") => (Language::Zh, None),
            Some(_) => (Language::En, common.language),
        };
        Ok(ChannelConfig {
            name: common.name,
            kind,
            language,
            unknown_language,
            templates: common.templates,
            timeout: common.timeout,
            max_attempts: common.max_attempts,
            max_age: common.max_age,
            min_backoff: common.min_backoff,
            max_backoff: common.max_backoff,
        })
    }
}

/// A channel's message language (`language:`): the language of its built-in templates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Language {
    /// English, the default.
    #[default]
    En,
    /// Simplified Chinese.
    Zh,
}

fn default_send_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_max_attempts() -> u32 {
    12
}
fn default_max_age() -> Duration {
    Duration::from_secs(24 * 3600)
}
fn default_min_backoff() -> Duration {
    Duration::from_secs(2)
}
fn default_max_backoff() -> Duration {
    Duration::from_secs(600)
}

/// Template overrides; unset parts use the built-in template of the channel's language.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TemplateConfig {
    /// Title line of one notification.
    #[serde(default)]
    pub title: Option<String>,
    /// Body of one notification (Markdown where the channel renders it).
    #[serde(default)]
    pub body: Option<String>,
}

/// Destination types and their settings. The `type` key selects the variant.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum ChannelKind {
    /// Prints each alert as a JSON log line; needs no external service.
    Log {},
    /// DingTalk custom robot (markdown, HMAC-SHA256 signing, 20 messages a minute).
    #[serde(rename_all = "camelCase")]
    Dingtalk {
        /// `https://oapi.dingtalk.com/robot/send?access_token=...` (a secret: use `${VAR}`).
        url: Secret,
        /// Signing secret (`SEC...`), if the robot uses signing.
        #[serde(default)]
        secret: Option<Secret>,
        /// Mobiles to @-mention.
        #[serde(default)]
        at_mobiles: Vec<String>,
        /// User ids to @-mention.
        #[serde(default)]
        at_user_ids: Vec<String>,
        /// The robot's custom keyword, if its security setting requires one.
        #[serde(default)]
        keyword: Option<String>,
    },
    /// Slack incoming webhook (Block Kit).
    Slack {
        /// `https://hooks.slack.com/services/...` (a secret).
        url: Secret,
    },
    /// Feishu / Lark custom bot (card messages, optional signing).
    Feishu {
        /// `https://open.feishu.cn/open-apis/bot/v2/hook/...` (a secret).
        url: Secret,
        /// Signing secret, if the bot uses signing.
        #[serde(default)]
        secret: Option<Secret>,
    },
    /// WeCom group robot (markdown).
    Wecom {
        /// `https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=...` (a secret).
        url: Secret,
    },
    /// Generic JSON webhook signed with Standard Webhooks headers.
    Webhook {
        /// Receiver URL (may carry a token: treated as a secret).
        url: Secret,
        /// `whsec_...` signing secret.
        #[serde(default)]
        secret: Option<Secret>,
    },
    /// Prometheus Alertmanager (`POST /api/v2/alerts` to every instance).
    #[serde(rename_all = "camelCase")]
    Alertmanager {
        /// Base URLs of every Alertmanager instance (an HA pair gets both).
        urls: Vec<Secret>,
        /// How often firing alerts are re-sent.
        #[serde(default = "default_resend_interval", deserialize_with = "de_duration")]
        resend_interval: Duration,
    },
    /// CloudEvents (`dev.driftsentinel.drift.firing|resolved`) to a Broker ingress.
    Cloudevents {
        /// Broker ingress URL.
        url: Secret,
    },
}

fn default_resend_interval() -> Duration {
    Duration::from_secs(60)
}

impl ChannelKind {
    /// The `type` name.
    pub fn type_name(&self) -> &'static str {
        match self {
            ChannelKind::Log {} => "log",
            ChannelKind::Dingtalk { .. } => "dingtalk",
            ChannelKind::Slack { .. } => "slack",
            ChannelKind::Feishu { .. } => "feishu",
            ChannelKind::Wecom { .. } => "wecom",
            ChannelKind::Webhook { .. } => "webhook",
            ChannelKind::Alertmanager { .. } => "alertmanager",
            ChannelKind::Cloudevents { .. } => "cloudevents",
        }
    }
}

impl ChannelConfig {
    /// The channel's name as routes refer to it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A `log` channel with defaults.
    pub fn log(name: &str) -> ChannelConfig {
        ChannelConfig {
            name: name.to_string(),
            kind: ChannelKind::Log {},
            language: Language::En,
            unknown_language: None,
            templates: TemplateConfig::default(),
            timeout: default_send_timeout(),
            max_attempts: default_max_attempts(),
            max_age: default_max_age(),
            min_backoff: default_min_backoff(),
            max_backoff: default_max_backoff(),
        }
    }
}
