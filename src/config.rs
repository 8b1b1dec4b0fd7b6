//! Configuration: one YAML file with camelCase keys, `${ENV_VAR}` interpolation, validated once.
//!
//! The file ships as a Kubernetes ConfigMap, so keys follow the Kubernetes camelCase convention.
//! Loading goes YAML text → generic value → `${VAR}` interpolation on string values only (so an
//! environment value can never inject YAML structure) → typed [`Config`] with the key path of any
//! type error → semantic validation. Every error names the key path and the reason.
//! `drift-sentinel config validate FILE` runs exactly [`load_file`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Why a configuration could not be loaded. The message always names the file or key path.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid YAML.
    #[error("config is not valid YAML: {0}")]
    Syntax(String),
    /// A `${VAR}` reference names a variable that is not set.
    #[error("{path}: environment variable {var} is not set")]
    MissingEnv { path: String, var: String },
    /// A key has the wrong type, an unknown name or a value out of range.
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
}

impl Error {
    /// A stable, bounded label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Read { .. } => "read",
            Error::Syntax(_) => "syntax",
            Error::MissingEnv { .. } => "missing_env",
            Error::Invalid { .. } => "invalid",
        }
    }

    fn invalid(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Invalid {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// A value that must never be printed: webhook URLs with tokens, signing keys.
///
/// `Debug` and `Display` redact; only [`Secret::expose`] gives the value, and only channel code
/// that puts it on the wire calls it.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    /// The secret value, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// True when no value is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// HTTP server settings.
    #[serde(default)]
    pub server: ServerConfig,
    /// Cluster name used when an event carries no `cluster` extension and its `source` is not
    /// in `clusters`.
    #[serde(default = "default_cluster_name")]
    pub default_cluster: String,
    /// Map from a CloudEvent `source` (the API server URL) to a cluster name.
    #[serde(default)]
    pub clusters: BTreeMap<String, String>,
    /// The embedded store.
    #[serde(default)]
    pub store: StoreConfig,
    /// Drift rules (classes, grace periods, scope, trusted managers, silences).
    #[serde(default)]
    pub rules: RulesConfig,
    /// Alert channels. Without any, findings go to a `log` channel.
    #[serde(default)]
    pub channels: Vec<ChannelConfig>,
    /// Routes, evaluated in order. Without any, every drift goes to every channel.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    /// Base URL where people reach this service (links in messages), e.g.
    /// `https://drift.example.com`.
    #[serde(default = "default_public_url")]
    pub public_url: Option<String>,
    /// The drift API and dashboard.
    #[serde(default)]
    pub api: ApiConfig,
    /// Authentication of the CloudEvents ingest (`POST /`).
    #[serde(default)]
    pub auth: AuthConfig,
    /// Listing the cluster through the Kubernetes API at start and periodically.
    #[serde(default)]
    pub resync: ResyncConfig,
}

/// Whether resync runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ResyncMode {
    /// On inside a cluster (in-cluster service account) or when `resync.kubeconfig` is set; off
    /// for a local run without one.
    #[default]
    Auto,
    /// Always on: `resync.kubeconfig`, else `$KUBECONFIG` or `~/.kube/config`, else in-cluster.
    On,
    /// Never.
    Off,
}

impl<'de> Deserialize<'de> for ResyncMode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Flag(bool),
            Word(String),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Flag(true) => Ok(ResyncMode::On),
            Raw::Flag(false) => Ok(ResyncMode::Off),
            Raw::Word(word) if word == "auto" => Ok(ResyncMode::Auto),
            Raw::Word(word) => Err(serde::de::Error::custom(format!(
                "expected true, false or \"auto\", got {word:?}"
            ))),
        }
    }
}

/// Resync: list every watched kind through the Kubernetes API at start and then every
/// `interval`, so objects that existed before drift-sentinel started, and changes the
/// ApiServerSource dropped, are classified too.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResyncConfig {
    /// `auto` (default), `true` or `false`.
    #[serde(default)]
    pub enabled: ResyncMode,
    /// Time between two complete lists.
    #[serde(default = "default_resync_interval", deserialize_with = "de_duration")]
    pub interval: Duration,
    /// A kubeconfig file; unset: in-cluster, or `$KUBECONFIG` / `~/.kube/config`.
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context; unset: its current context.
    #[serde(default)]
    pub context: Option<String>,
    /// The cluster name the listed objects are filed under. It must be the name events from
    /// this cluster carry (their `cluster` extension), or objects would be tracked twice; unset:
    /// `defaultCluster`.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Objects per list request (`limit`); the rest comes page by page (`continue`).
    #[serde(default = "default_page_size")]
    pub page_size: u32,
    /// What to list: by default exactly what `k8s/apiserversource.yaml` watches.
    #[serde(default = "default_resync_resources")]
    pub resources: Vec<ResourceConfig>,
}

fn default_resync_interval() -> Duration {
    Duration::from_secs(600)
}
fn default_page_size() -> u32 {
    500
}

impl Default for ResyncConfig {
    fn default() -> Self {
        ResyncConfig {
            enabled: ResyncMode::default(),
            interval: default_resync_interval(),
            kubeconfig: None,
            context: None,
            cluster: None,
            page_size: default_page_size(),
            resources: default_resync_resources(),
        }
    }
}

/// One kind to list, as in an ApiServerSource's `spec.resources[]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceConfig {
    /// `apiVersion`, e.g. `serving.knative.dev/v1`.
    pub api_version: String,
    /// `kind`, e.g. `Service`.
    pub kind: String,
    /// The resource's plural name in API paths; unset: derived from `kind` (`services`).
    #[serde(default)]
    pub plural: Option<String>,
    /// A label selector (`matchLabels`, `matchExpressions`), as in the ApiServerSource.
    #[serde(default)]
    pub selector: LabelSelectorConfig,
}

/// A Kubernetes label selector.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorConfig {
    /// Labels that must have these values.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// Requirements (`In`, `NotIn`, `Exists`, `DoesNotExist`).
    #[serde(default)]
    pub match_expressions: Vec<SelectorRequirementConfig>,
}

/// One `matchExpressions[]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectorRequirementConfig {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// Values for `In` and `NotIn`.
    #[serde(default)]
    pub values: Vec<String>,
}

/// What `k8s/apiserversource.yaml` watches: Knative Serving's kinds, the Deployments Knative
/// creates for Revisions, and Knative Serving's ConfigMaps.
pub fn default_resync_resources() -> Vec<ResourceConfig> {
    let plain = |api_version: &str, kind: &str| ResourceConfig {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        plural: None,
        selector: LabelSelectorConfig::default(),
    };
    vec![
        plain("serving.knative.dev/v1", "Service"),
        plain("serving.knative.dev/v1", "Configuration"),
        plain("serving.knative.dev/v1", "Revision"),
        plain("serving.knative.dev/v1", "Route"),
        ResourceConfig {
            selector: LabelSelectorConfig {
                match_labels: BTreeMap::new(),
                match_expressions: vec![SelectorRequirementConfig {
                    key: "serving.knative.dev/revision".to_string(),
                    operator: "Exists".to_string(),
                    values: Vec::new(),
                }],
            },
            ..plain("apps/v1", "Deployment")
        },
        ResourceConfig {
            selector: LabelSelectorConfig {
                match_labels: BTreeMap::from([(
                    "app.kubernetes.io/name".to_string(),
                    "knative-serving".to_string(),
                )]),
                match_expressions: Vec::new(),
            },
            ..plain("v1", "ConfigMap")
        },
    ]
}

/// Who may post CloudEvents. Without either setting, `POST /` is open (protect it with a
/// NetworkPolicy).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthConfig {
    /// Knative Eventing's OIDC sender identity: every `POST /` needs a JWT from this issuer.
    #[serde(default)]
    pub oidc: Option<OidcConfig>,
    /// A static bearer token, for clusters without OIDC (it protects against callers other than
    /// the Broker; Knative cannot attach a static token to a Trigger delivery).
    #[serde(default)]
    pub bearer_token: Option<Secret>,
}

/// OIDC verification of Knative's delivery tokens.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OidcConfig {
    /// The token issuer (`iss`), e.g. `https://kubernetes.default.svc`.
    pub issuer: String,
    /// The audience the Trigger sets (`spec.subscriber.audience`).
    pub audience: String,
    /// JWKS URL; discovered from `<issuer>/.well-known/openid-configuration` when unset.
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// Allowed `sub` values (e.g. the Trigger's OIDC service account); empty allows any.
    #[serde(default)]
    pub allowed_subjects: Vec<String>,
    /// PEM bundle to trust for the issuer's TLS (the cluster CA in a pod).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// A bearer token file sent when fetching discovery and JWKS (the pod's service-account
    /// token: the API server requires authentication for them).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Allowed clock skew for `exp` and `nbf`.
    #[serde(default = "default_leeway", deserialize_with = "de_duration")]
    pub leeway: Duration,
}

fn default_leeway() -> Duration {
    Duration::from_secs(30)
}

/// The drift API (`/api/v1`) and dashboard (`/ui`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiConfig {
    /// When set, `/api/v1` and `/ui` require `Authorization: Bearer <token>` (the dashboard also
    /// accepts `?token=` once and keeps it in a cookie). The CloudEvents ingest is not affected.
    #[serde(default)]
    pub token: Option<Secret>,
}

fn default_cluster_name() -> String {
    "default".to_string()
}

/// HTTP server settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerConfig {
    /// Listen port; the `PORT` environment variable (set by Knative) wins over it.
    #[serde(default = "default_port")]
    pub port: u16,
    /// Largest accepted request body in bytes (default 4 MiB; Kubernetes objects can exceed 1 MiB).
    #[serde(default = "default_body_limit")]
    pub body_limit_bytes: usize,
    /// Longest time one request may take before it is answered `503`.
    #[serde(default = "default_request_timeout", deserialize_with = "de_duration")]
    pub request_timeout: Duration,
    /// How long SIGTERM waits for in-flight requests and commits.
    #[serde(default = "default_drain_timeout", deserialize_with = "de_duration")]
    pub drain_timeout: Duration,
    /// Events queued for the single writer before ingest answers `503`.
    #[serde(default = "default_queue_capacity")]
    pub queue_capacity: usize,
    /// Request bytes held in flight at once (bodies being read, decoded or waiting for their
    /// commit); beyond it ingest answers `503` before reading the body. Unset: 16 ×
    /// `bodyLimitBytes`.
    #[serde(default)]
    pub in_flight_bytes: Option<usize>,
}

impl ServerConfig {
    /// The admission budget in bytes.
    pub fn in_flight_limit(&self) -> usize {
        self.in_flight_bytes.unwrap_or_else(|| {
            self.body_limit_bytes
                .saturating_mul(crate::ingest::admission::IN_FLIGHT_BODIES)
        })
    }
}

fn default_port() -> u16 {
    8080
}
fn default_body_limit() -> usize {
    4 * 1024 * 1024
}
fn default_request_timeout() -> Duration {
    Duration::from_secs(30)
}
fn default_drain_timeout() -> Duration {
    Duration::from_secs(20)
}
fn default_queue_capacity() -> usize {
    4096
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            port: default_port(),
            body_limit_bytes: default_body_limit(),
            request_timeout: default_request_timeout(),
            drain_timeout: default_drain_timeout(),
            queue_capacity: default_queue_capacity(),
            in_flight_bytes: None,
        }
    }
}

/// The embedded SQLite store.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StoreConfig {
    /// Path of the SQLite file (created if missing; WAL mode).
    #[serde(default = "default_store_path")]
    pub path: PathBuf,
    /// How long a CloudEvent (`source`, `id`) is remembered for de-duplication. The Broker's
    /// retries span minutes; a day leaves a wide margin.
    #[serde(default = "default_dedup_retention", deserialize_with = "de_duration")]
    pub dedup_retention: Duration,
    /// How long resolved drifts, their history and finished deliveries are kept (audit trail).
    #[serde(default = "default_retention", deserialize_with = "de_duration")]
    pub retention: Duration,
}

fn default_retention() -> Duration {
    Duration::from_secs(90 * 24 * 3600)
}

fn default_store_path() -> PathBuf {
    PathBuf::from("drift-sentinel.db")
}
fn default_dedup_retention() -> Duration {
    Duration::from_secs(24 * 3600)
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            path: default_store_path(),
            dedup_retention: default_dedup_retention(),
            retention: default_retention(),
        }
    }
}

/// One alert channel: a name, a `type`, the type's own settings, and delivery settings.
#[derive(Debug, Clone)]
pub struct ChannelConfig {
    /// Name that routes refer to.
    pub name: String,
    /// The destination and its settings.
    pub kind: ChannelKind,
    /// Message language for built-in templates: `en` or `zh`.
    pub language: String,
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
}

/// The settings every channel type shares.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CommonChannelFields {
    name: String,
    #[serde(default = "default_language")]
    language: String,
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
        Ok(ChannelConfig {
            name: common.name,
            kind,
            language: common.language,
            templates: common.templates,
            timeout: common.timeout,
            max_attempts: common.max_attempts,
            max_age: common.max_age,
            min_backoff: common.min_backoff,
            max_backoff: common.max_backoff,
        })
    }
}

fn default_language() -> String {
    "en".to_string()
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
            language: default_language(),
            templates: TemplateConfig::default(),
            timeout: default_send_timeout(),
            max_attempts: default_max_attempts(),
            max_age: default_max_age(),
            min_backoff: default_min_backoff(),
            max_backoff: default_max_backoff(),
        }
    }
}

/// One route: which drifts go to which channels, and how they are grouped and repeated.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteConfig {
    /// What the route matches (every given matcher must match).
    #[serde(default, rename = "match")]
    pub matcher: RouteMatch,
    /// Channels to send to.
    pub channels: Vec<String>,
    /// Keep evaluating later routes after a match.
    #[serde(default, rename = "continue")]
    pub continue_matching: bool,
    /// How long to wait for more drifts of the same group before sending one message.
    #[serde(default = "default_group_wait", deserialize_with = "de_duration")]
    pub group_wait: Duration,
    /// Drift fields that form a group: `cluster`, `namespace`, `class`, `severity`, `kind`,
    /// `name`, `service`.
    #[serde(default = "default_group_by")]
    pub group_by: Vec<String>,
    /// Reminder interval while a drift keeps firing (`0s` = never).
    #[serde(default = "default_repeat_interval", deserialize_with = "de_duration")]
    pub repeat_interval: Duration,
    /// Send a message when a drift resolves.
    #[serde(default = "default_true")]
    pub send_resolved: bool,
}

fn default_group_wait() -> Duration {
    Duration::from_secs(10)
}
fn default_group_by() -> Vec<String> {
    vec![
        "cluster".to_string(),
        "namespace".to_string(),
        "class".to_string(),
    ]
}
fn default_repeat_interval() -> Duration {
    Duration::from_secs(4 * 3600)
}
fn default_true() -> bool {
    true
}

/// Route matchers; absent matchers match everything.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteMatch {
    /// Class ids.
    #[serde(default)]
    pub class: Vec<String>,
    /// Minimum severity (`warning` matches warning and critical).
    #[serde(default)]
    pub severity: Option<String>,
    /// Cluster name globs.
    #[serde(default)]
    pub cluster: Vec<String>,
    /// Namespace globs.
    #[serde(default)]
    pub namespace: Vec<String>,
    /// Kinds.
    #[serde(default)]
    pub kind: Vec<String>,
    /// Object labels that must be present with these values.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// Public UI base URL, used for links in messages.
fn default_public_url() -> Option<String> {
    None
}

/// Drift rules: which classes run, how long a condition must hold, and what is in scope.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RulesConfig {
    /// Defaults for every class.
    #[serde(default)]
    pub defaults: RuleDefaults,
    /// Per-class overrides, keyed by the public class id (`traffic_drift`, ...).
    #[serde(default)]
    pub classes: BTreeMap<String, ClassRule>,
    /// Field managers whose writes are not manual edits. Replaces the default list when set.
    #[serde(default = "default_trusted_managers")]
    pub trusted_managers: Vec<String>,
    /// Which objects drifts are reported for.
    #[serde(default)]
    pub scope: ScopeConfig,
    /// JSON pointers ignored in diffs, per kind (`*` for every kind), like Argo CD's
    /// `ignoreDifferences`. A pointer covers everything below it.
    #[serde(default)]
    pub ignore_paths: BTreeMap<String, Vec<String>>,
    /// ConfigMaps watched by `config_drift`, as `namespace/name` globs.
    #[serde(default = "default_watched_config_maps")]
    pub watched_config_maps: Vec<String>,
    /// Silences: matching drifts are tracked but not sent.
    #[serde(default)]
    pub silences: Vec<SilenceConfig>,
    /// A directory of desired manifests (as kept in Git) for `baseline_drift`.
    #[serde(default)]
    pub baseline_dir: Option<PathBuf>,
}

impl Default for RulesConfig {
    fn default() -> Self {
        RulesConfig {
            defaults: RuleDefaults::default(),
            classes: BTreeMap::new(),
            trusted_managers: default_trusted_managers(),
            scope: ScopeConfig::default(),
            ignore_paths: BTreeMap::new(),
            watched_config_maps: default_watched_config_maps(),
            silences: Vec::new(),
            baseline_dir: None,
        }
    }
}

fn default_watched_config_maps() -> Vec<String> {
    vec![
        "knative-serving/config-*".to_string(),
        "knative-eventing/config-*".to_string(),
    ]
}

/// Field managers trusted by default: Knative's controllers, Kubernetes' own controllers and the
/// GitOps controllers. People's tools (`kubectl-edit`, `kubectl-patch`, `kn`, ...) are absent.
pub fn default_trusted_managers() -> Vec<String> {
    [
        "controller",
        "autoscaler",
        "webhook",
        "kube-controller-manager",
        "kube-scheduler",
        "kubelet",
        "argocd-controller",
        "argocd-application-controller",
        "kustomize-controller",
        "helm-controller",
        "knative-operator",
        "operator",
    ]
    .iter()
    .map(|name| name.to_string())
    .collect()
}

/// Defaults shared by every class.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleDefaults {
    /// Grace for classes that set none of their own (each class has a built-in default).
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub grace: Option<Duration>,
}

/// Per-class settings; unset fields fall back to the class's own defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClassRule {
    /// Whether the class runs at all.
    pub enabled: Option<bool>,
    /// `info`, `warning` or `critical`.
    pub severity: Option<String>,
    /// How long the condition must hold before it fires.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub grace: Option<Duration>,
    /// `traffic_drift`: allowed difference in percent points per target.
    pub tolerance_percent: Option<f64>,
    /// `revision_pileup`: non-active Revisions per Configuration above which it fires.
    pub threshold: Option<u64>,
}

/// Which objects drifts are reported for. Objects out of scope are still tracked (their
/// relatives may be in scope) but never open a drift.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScopeConfig {
    /// Namespace globs to include (empty: all).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Namespace globs to exclude.
    #[serde(default)]
    pub exclude_namespaces: Vec<String>,
    /// Kinds to include (empty: all).
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Labels an object must carry (exact values).
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

/// A silence: drifts matching every given matcher are muted until `expiresAt`.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SilenceConfig {
    /// Matchers: `class`, `severity`, `cluster`, `namespace`, `kind`, `name` (globs), or
    /// `label:<key>` (exact).
    pub matchers: BTreeMap<String, String>,
    /// RFC 3339 expiry; absent means until removed.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// Why.
    #[serde(default)]
    pub comment: Option<String>,
}

impl SilenceConfig {
    /// The silence this configures.
    pub fn to_silence(&self) -> crate::model::Silence {
        crate::model::Silence {
            matchers: self.matchers.clone(),
            expires_at: self.expires_at.clone(),
            comment: self.comment.clone(),
        }
    }

    /// The configuration of a silence (the API's answers show silences in this shape).
    pub fn from_silence(silence: &crate::model::Silence) -> SilenceConfig {
        SilenceConfig {
            matchers: silence.matchers.clone(),
            expires_at: silence.expires_at.clone(),
            comment: silence.comment.clone(),
        }
    }
}

/// Loads, interpolates and validates a configuration file.
pub fn load_file(path: &Path) -> Result<Config, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    load_str(&text, &|name| std::env::var(name).ok())
}

/// Loads a configuration from text, resolving `${VAR}` through `lookup_env`.
pub fn load_str(text: &str, lookup_env: &dyn Fn(&str) -> Option<String>) -> Result<Config, Error> {
    // An empty file (or one holding only comments) is the all-defaults configuration.
    let mut value: serde_json::Value = if text.trim().is_empty() {
        serde_json::Value::Object(Default::default())
    } else {
        serde_saphyr::from_str(text).map_err(|error| Error::Syntax(error.to_string()))?
    };
    if value.is_null() {
        value = serde_json::Value::Object(Default::default());
    }
    strip_nulls(&mut value);
    interpolate(&mut value, "", lookup_env)?;
    let config: Config = serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let path = if path == "." {
            "<root>".to_string()
        } else {
            path
        };
        Error::invalid(path, redact_urls(&error.into_inner().to_string()))
    })?;
    validate(&config)?;
    Ok(config)
}

/// Replaces URLs in an error message: webhook URLs carry tokens, and a type error quotes the
/// value it rejected.
pub fn redact_urls(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(start) = rest
        .find("http://")
        .into_iter()
        .chain(rest.find("https://"))
        .min()
    {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '`')
            .unwrap_or(tail.len());
        out.push_str("<redacted URL>");
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// A key with no value (`defaults:` followed only by comments) means "not set", as it does in
/// Kubernetes manifests.
fn strip_nulls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|_, item| !item.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Replaces `${VAR}` in every string value; `$${` escapes a literal `${`.
fn interpolate(
    value: &mut serde_json::Value,
    path: &str,
    lookup_env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), Error> {
    match value {
        serde_json::Value::String(text) if text.contains("${") => {
            *text = interpolate_str(text, path, lookup_env)?;
        }
        serde_json::Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                interpolate(item, &format!("{path}[{index}]"), lookup_env)?;
            }
        }
        serde_json::Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                interpolate(item, &child, lookup_env)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn interpolate_str(
    text: &str,
    path: &str,
    lookup_env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, Error> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('$') {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        if let Some(escaped) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = escaped;
        } else if let Some(body) = tail.strip_prefix("${") {
            let end = body
                .find('}')
                .ok_or_else(|| Error::invalid(path, "unterminated ${...} reference".to_string()))?;
            let name = &body[..end];
            let valid =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(Error::invalid(
                    path,
                    format!("invalid environment variable name {name:?} in ${{...}}"),
                ));
            }
            let resolved = lookup_env(name).ok_or_else(|| Error::MissingEnv {
                path: path.to_string(),
                var: name.to_string(),
            })?;
            out.push_str(&resolved);
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The class ids the engine knows; kept here so validation can reject typos.
pub const KNOWN_CLASSES: &[&str] = &[
    "generation_lag",
    "not_ready",
    "revision_not_ready",
    "traffic_drift",
    "image_drift",
    "manual_edit",
    "config_drift",
    "revision_pileup",
    "replica_drift",
    "unexpected_delete",
    "orphan",
    "baseline_drift",
];

/// Severities, lowest first.
pub const SEVERITIES: &[&str] = &["info", "warning", "critical"];

fn validate(config: &Config) -> Result<(), Error> {
    if config.default_cluster.trim().is_empty() {
        return Err(Error::invalid("defaultCluster", "must not be empty"));
    }
    for (source, name) in &config.clusters {
        if name.trim().is_empty() {
            return Err(Error::invalid(
                format!("clusters.{source}"),
                "cluster name must not be empty",
            ));
        }
    }
    let server = &config.server;
    if server.body_limit_bytes < 1024 {
        return Err(Error::invalid(
            "server.bodyLimitBytes",
            "must be at least 1024 bytes",
        ));
    }
    if server
        .in_flight_bytes
        .is_some_and(|bytes| bytes < server.body_limit_bytes)
    {
        return Err(Error::invalid(
            "server.inFlightBytes",
            "must be at least server.bodyLimitBytes (one largest request must fit)",
        ));
    }
    if server.queue_capacity == 0 {
        return Err(Error::invalid("server.queueCapacity", "must be at least 1"));
    }
    if server.request_timeout.is_zero() {
        return Err(Error::invalid("server.requestTimeout", "must be positive"));
    }
    if config.store.path.as_os_str().is_empty() {
        return Err(Error::invalid("store.path", "must not be empty"));
    }
    validate_resync(&config.resync)?;
    for (class, rule) in &config.rules.classes {
        if !KNOWN_CLASSES.contains(&class.as_str()) {
            return Err(Error::invalid(
                format!("rules.classes.{class}"),
                format!("unknown drift class; known: {}", KNOWN_CLASSES.join(", ")),
            ));
        }
        if let Some(tolerance) = rule.tolerance_percent {
            if !(0.0..=100.0).contains(&tolerance) {
                return Err(Error::invalid(
                    format!("rules.classes.{class}.tolerancePercent"),
                    "must be between 0 and 100",
                ));
            }
        }
        if let Some(severity) = &rule.severity {
            if !SEVERITIES.contains(&severity.as_str()) {
                return Err(Error::invalid(
                    format!("rules.classes.{class}.severity"),
                    format!("must be one of {}", SEVERITIES.join(", ")),
                ));
            }
        }
    }
    for (index, silence) in config.rules.silences.iter().enumerate() {
        let path = format!("rules.silences[{index}]");
        if silence.matchers.is_empty() {
            return Err(Error::invalid(
                format!("{path}.matchers"),
                "needs at least one matcher",
            ));
        }
        for key in silence.matchers.keys() {
            let known = ["class", "severity", "cluster", "namespace", "kind", "name"];
            if !(known.contains(&key.as_str()) || key.starts_with("label:")) {
                return Err(Error::invalid(
                    format!("{path}.matchers.{key}"),
                    format!("unknown matcher; use {} or label:<key>", known.join(", ")),
                ));
            }
        }
        if let Some(expires) = &silence.expires_at {
            if chrono::DateTime::parse_from_rfc3339(expires).is_err() {
                return Err(Error::invalid(
                    format!("{path}.expiresAt"),
                    format!("{expires:?} is not an RFC 3339 time"),
                ));
            }
        }
    }
    for (kind, paths) in &config.rules.ignore_paths {
        for (index, pointer) in paths.iter().enumerate() {
            if !pointer.starts_with('/') {
                return Err(Error::invalid(
                    format!("rules.ignorePaths.{kind}[{index}]"),
                    format!("{pointer:?} is not a JSON pointer (must start with /)"),
                ));
            }
        }
    }
    let mut names = BTreeSet::new();
    for (index, channel) in config.channels.iter().enumerate() {
        validate_channel(index, channel)?;
        let name = channel.name();
        if !names.insert(name.to_string()) {
            return Err(Error::invalid(
                format!("channels[{index}].name"),
                format!("duplicate channel name {name:?}"),
            ));
        }
    }
    if let Some(oidc) = &config.auth.oidc {
        if reqwest::Url::parse(&oidc.issuer).is_err() {
            return Err(Error::invalid("auth.oidc.issuer", "must be a URL"));
        }
        if oidc.audience.trim().is_empty() {
            return Err(Error::invalid("auth.oidc.audience", "must not be empty"));
        }
        if let Some(url) = &oidc.jwks_url {
            if reqwest::Url::parse(url).is_err() {
                return Err(Error::invalid("auth.oidc.jwksUrl", "must be a URL"));
            }
        }
    }
    if config
        .api
        .token
        .as_ref()
        .is_some_and(|token| token.expose().trim().is_empty())
    {
        return Err(Error::invalid(
            "api.token",
            "is empty (an unset ${VAR}?); remove the key to leave the API open",
        ));
    }
    if config
        .auth
        .bearer_token
        .as_ref()
        .is_some_and(Secret::is_empty)
    {
        return Err(Error::invalid(
            "auth.bearerToken",
            "is empty (an unset ${VAR}?)",
        ));
    }
    for (index, route) in config.routes.iter().enumerate() {
        let path = format!("routes[{index}]");
        if route.channels.is_empty() {
            return Err(Error::invalid(
                format!("{path}.channels"),
                "needs at least one channel",
            ));
        }
        for (position, name) in route.channels.iter().enumerate() {
            if !names.contains(name) {
                return Err(Error::invalid(
                    format!("{path}.channels[{position}]"),
                    format!(
                        "no channel named {name:?} (channels: {})",
                        names.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        }
        for (position, class) in route.matcher.class.iter().enumerate() {
            if !KNOWN_CLASSES.contains(&class.as_str()) {
                return Err(Error::invalid(
                    format!("{path}.match.class[{position}]"),
                    format!("unknown drift class {class:?}"),
                ));
            }
        }
        if let Some(severity) = &route.matcher.severity {
            if !SEVERITIES.contains(&severity.as_str()) {
                return Err(Error::invalid(
                    format!("{path}.match.severity"),
                    format!("must be one of {}", SEVERITIES.join(", ")),
                ));
            }
        }
        for (position, field) in route.group_by.iter().enumerate() {
            let known = [
                "cluster",
                "namespace",
                "class",
                "severity",
                "kind",
                "name",
                "service",
            ];
            if !known.contains(&field.as_str()) {
                return Err(Error::invalid(
                    format!("{path}.groupBy[{position}]"),
                    format!("unknown field {field:?}; use {}", known.join(", ")),
                ));
            }
        }
    }
    Ok(())
}

fn validate_resync(resync: &ResyncConfig) -> Result<(), Error> {
    if resync.interval < Duration::from_secs(10) {
        return Err(Error::invalid(
            "resync.interval",
            "must be at least 10s (each resync lists every watched object)",
        ));
    }
    if !(1..=10_000).contains(&resync.page_size) {
        return Err(Error::invalid(
            "resync.pageSize",
            "must be between 1 and 10000",
        ));
    }
    if resync
        .cluster
        .as_deref()
        .is_some_and(|name| name.trim().is_empty())
    {
        return Err(Error::invalid("resync.cluster", "must not be empty"));
    }
    for (index, resource) in resync.resources.iter().enumerate() {
        let path = format!("resync.resources[{index}]");
        let version = resource.api_version.rsplit('/').next().unwrap_or_default();
        if resource.api_version.split('/').count() > 2 || version.is_empty() {
            return Err(Error::invalid(
                format!("{path}.apiVersion"),
                "must be `group/version` or `version` (e.g. serving.knative.dev/v1, v1)",
            ));
        }
        if resource.kind.trim().is_empty() {
            return Err(Error::invalid(format!("{path}.kind"), "must not be empty"));
        }
        for (position, requirement) in resource.selector.match_expressions.iter().enumerate() {
            let at = format!("{path}.selector.matchExpressions[{position}]");
            let needs_values = match requirement.operator.as_str() {
                "In" | "NotIn" => true,
                "Exists" | "DoesNotExist" => false,
                other => {
                    return Err(Error::invalid(
                        format!("{at}.operator"),
                        format!(
                            "unknown operator {other:?}; use In, NotIn, Exists or DoesNotExist"
                        ),
                    ))
                }
            };
            if needs_values == requirement.values.is_empty() {
                return Err(Error::invalid(
                    format!("{at}.values"),
                    if needs_values {
                        "In and NotIn need at least one value"
                    } else {
                        "Exists and DoesNotExist take no values"
                    },
                ));
            }
        }
    }
    Ok(())
}

fn validate_channel(index: usize, channel: &ChannelConfig) -> Result<(), Error> {
    let path = format!("channels[{index}]");
    if channel.name.trim().is_empty() {
        return Err(Error::invalid(format!("{path}.name"), "must not be empty"));
    }
    if !["en", "zh"].contains(&channel.language.as_str()) {
        return Err(Error::invalid(
            format!("{path}.language"),
            "must be en or zh",
        ));
    }
    if channel.max_attempts == 0 {
        return Err(Error::invalid(
            format!("{path}.maxAttempts"),
            "must be at least 1",
        ));
    }
    if channel.timeout.is_zero() {
        return Err(Error::invalid(
            format!("{path}.timeout"),
            "must be positive",
        ));
    }
    let check_url = |key: &str, url: &Secret| -> Result<(), Error> {
        let text = url.expose();
        // Never echo the URL: it carries the token.
        if !(text.starts_with("http://") || text.starts_with("https://")) {
            return Err(Error::invalid(
                format!("{path}.{key}"),
                "must be an http:// or https:// URL",
            ));
        }
        if reqwest::Url::parse(text).is_err() {
            return Err(Error::invalid(
                format!("{path}.{key}"),
                "is not a valid URL",
            ));
        }
        Ok(())
    };
    match &channel.kind {
        ChannelKind::Log {} => {}
        ChannelKind::Dingtalk { url, secret, .. }
        | ChannelKind::Feishu { url, secret }
        | ChannelKind::Webhook { url, secret } => {
            check_url("url", url)?;
            if let Some(secret) = secret {
                if secret.is_empty() {
                    return Err(Error::invalid(
                        format!("{path}.secret"),
                        "is empty (an unset ${VAR}?)",
                    ));
                }
                if let ChannelKind::Webhook { .. } = channel.kind {
                    let ok = secret
                        .expose()
                        .strip_prefix("whsec_")
                        .is_some_and(base64_decodes);
                    if !ok {
                        return Err(Error::invalid(
                            format!("{path}.secret"),
                            "must be whsec_ followed by a base64 key",
                        ));
                    }
                }
            }
        }
        ChannelKind::Slack { url }
        | ChannelKind::Wecom { url }
        | ChannelKind::Cloudevents { url } => check_url("url", url)?,
        ChannelKind::Alertmanager {
            urls,
            resend_interval,
        } => {
            if urls.is_empty() {
                return Err(Error::invalid(
                    format!("{path}.urls"),
                    "needs at least one Alertmanager URL",
                ));
            }
            for (position, url) in urls.iter().enumerate() {
                check_url(&format!("urls[{position}]"), url)?;
            }
            if resend_interval.is_zero() {
                return Err(Error::invalid(
                    format!("{path}.resendInterval"),
                    "must be positive",
                ));
            }
        }
    }
    Ok(())
}

fn base64_decodes(text: &str) -> bool {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .is_ok()
}

fn de_duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    crate::time::parse_duration(&text).map_err(serde::de::Error::custom)
}

fn de_opt_duration<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    let text = Option::<String>::deserialize(deserializer)?;
    text.map(|text| crate::time::parse_duration(&text).map_err(serde::de::Error::custom))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn empty_file_is_all_defaults() {
        let config = load_str("# only a comment\n", &no_env).unwrap();
        assert_eq!(config.server.port, 8080);
        assert_eq!(config.server.body_limit_bytes, 4 * 1024 * 1024);
        assert_eq!(config.default_cluster, "default");
        assert!(config
            .rules
            .trusted_managers
            .contains(&"controller".to_string()));
    }

    #[test]
    fn env_interpolation_in_strings() {
        let env = |name: &str| (name == "CLUSTER").then(|| "prod".to_string());
        let config = load_str("defaultCluster: ${CLUSTER}-eu\n", &env).unwrap();
        assert_eq!(config.default_cluster, "prod-eu");
        let config = load_str("defaultCluster: a$${B}\n", &env).unwrap();
        assert_eq!(config.default_cluster, "a${B}");
    }

    #[test]
    fn missing_env_names_key_and_variable() {
        let error = load_str("channels:\n  - type: log\n    name: ${NOPE}\n", &no_env).unwrap_err();
        assert_eq!(
            error.to_string(),
            "channels[0].name: environment variable NOPE is not set"
        );
    }

    #[test]
    fn unknown_key_names_its_path() {
        let error = load_str("server:\n  prot: 1\n", &no_env).unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with("server.prot: unknown field `prot`"),
            "{message}"
        );
    }

    #[test]
    fn wrong_type_names_its_path() {
        let error = load_str("server:\n  port: many\n", &no_env).unwrap_err();
        assert!(error.to_string().starts_with("server.port: "), "{error}");
    }

    #[test]
    fn bad_duration_is_explained() {
        let error = load_str("server:\n  drainTimeout: soon\n", &no_env).unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with("server.drainTimeout: invalid duration \"soon\""),
            "{message}"
        );
    }

    #[test]
    fn unknown_class_is_rejected() {
        let error = load_str("rules:\n  classes:\n    trafic_drift: {}\n", &no_env).unwrap_err();
        assert!(error
            .to_string()
            .starts_with("rules.classes.trafic_drift: unknown drift class"));
    }

    #[test]
    fn syntax_error_is_reported() {
        let error = load_str("server: [unclosed\n", &no_env).unwrap_err();
        assert_eq!(error.kind(), "syntax");
    }

    #[test]
    fn channels_and_routes_validate_with_paths() {
        let env = |name: &str| {
            (name == "DT")
                .then(|| "https://oapi.dingtalk.com/robot/send?access_token=abc".to_string())
        };
        let config = load_str(
            "channels:\n  - name: ops\n    type: dingtalk\n    url: ${DT}\n    secret: SECxyz\n    atMobiles: ['138']\nroutes:\n  - channels: [ops]\n    match: {severity: warning}\n",
            &env,
        )
        .unwrap();
        assert_eq!(config.channels[0].kind.type_name(), "dingtalk");
        let error = load_str("channels:\n  - {name: a, type: slack, url: 'https://hooks.slack.com/x', colour: red}\n", &no_env).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("channels[0]: unknown field `colour`"),
            "{error}"
        );
        let error = load_str(
            "channels:\n  - {name: a, type: slack, url: 'not a url'}\n",
            &no_env,
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "channels[0].url: must be an http:// or https:// URL"
        );
        let error = load_str(
            "channels:\n  - {name: a, type: log}\nroutes:\n  - channels: [b]\n",
            &no_env,
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "routes[0].channels[0]: no channel named \"b\" (channels: a)"
        );
        let error =
            load_str("channels:\n  - {name: a, type: carrier-pigeon}\n", &no_env).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("unknown variant `carrier-pigeon`"),
            "{error}"
        );
    }

    #[test]
    fn type_errors_never_echo_urls() {
        let error = load_str(
            "channels:\n  - name: am\n    type: alertmanager\n    urls: https://am.example/?token=s3cret\n",
            &no_env,
        )
        .unwrap_err();
        let message = error.to_string();
        assert!(!message.contains("s3cret"), "{message}");
        assert!(message.contains("<redacted URL>"), "{message}");
    }

    #[test]
    fn empty_api_token_is_refused() {
        let env = |name: &str| (name == "API_TOKEN").then(String::new);
        let error = load_str("api:\n  token: ${API_TOKEN}\n", &env).unwrap_err();
        assert!(
            error.to_string().starts_with("api.token: is empty"),
            "{error}"
        );
    }

    #[test]
    fn secret_is_redacted() {
        let secret = Secret::new("https://oapi.dingtalk.com/robot/send?access_token=abc");
        assert_eq!(format!("{secret:?}"), "Secret(***)");
        assert_eq!(format!("{secret}"), "***");
    }
}
