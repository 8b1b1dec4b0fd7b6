//! Configuration: one YAML file with camelCase keys, `${ENV_VAR}` interpolation, validated once.
//!
//! The file ships as a Kubernetes ConfigMap, so keys follow the Kubernetes camelCase convention.
//! One file per section: [`server`] (with `store:`, `api:`, `auth:`), [`resync`], [`rules`],
//! [`channels`], [`routes`], [`fleet`], [`traffic`]; [`load`] reads and interpolates,
//! [`validate`] checks meaning. Every error names the key path and the reason. `drift-sentinel config validate FILE` runs exactly
//! [`load_file`]. Configuration is the YAML wire format: it compiles into the engine's own types
//! (`RulesConfig::compile`), which know nothing of it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

mod channels;
mod duration;
mod fleet;
mod invariants;
mod limits;
mod load;
mod remediation;
mod resync;
mod routes;
mod rules;
mod secret;
mod server;
mod shard;
mod traffic;
mod validate;

pub use channels::{ChannelConfig, ChannelKind, Language, TemplateConfig};
pub(crate) use duration::{de_duration, de_opt_duration};
pub use fleet::FleetConfig;
pub use invariants::{load_rules_file, parse_rules_text};
pub use limits::LimitsConfig;
pub use load::{load_file, load_file_text, load_str, sections};
pub use remediation::{
    BudgetConfig, FightConfig, MatchConfig, ModeConfig, RemediationConfig, RuleConfig,
};
pub use resync::{
    default_resync_resources, LabelSelectorConfig, ResourceConfig, ResyncConfig, ResyncMode,
    SelectorRequirementConfig,
};
pub use routes::{router, RouteConfig, RouteMatch};
pub use rules::{
    default_trusted_managers, ClassRule, RuleDefaults, RulesConfig, ScopeConfig, SilenceConfig,
};
pub use secret::Secret;
pub use server::{
    check_store_url, ApiConfig, AuthConfig, LeaseConfig, OidcConfig, ServerConfig, StoreConfig,
    StoreUrlError, DEFAULT_BODY_MIN_BYTES_PER_SECOND, DEFAULT_BODY_READ_TIMEOUT,
    DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_JWKS_MAX_AGE,
    DEFAULT_MAX_CONNECTIONS, IN_FLIGHT_BODIES,
};
pub use shard::ShardConfig;
pub use traffic::{
    preset, promql_duration, Preset, PrometheusConfig, TrafficConfig, NAMESPACE_LABELS, PRESETS,
    REVISION_LABELS, SERVICE_LABELS,
};

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
    /// How much state is kept.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Groups of clusters that should hold the same desired state (`fleet.groups`).
    #[serde(default)]
    pub fleet: fleet::FleetConfig,
    /// Repairs of firing drifts (off unless set).
    #[serde(default)]
    pub remediation: RemediationConfig,
    /// The clusters this shard owns (a fleet split over several writers on PostgreSQL).
    #[serde(default, deserialize_with = "shard::de_set")]
    pub shard: shard::ShardConfig,
    /// Served traffic from Prometheus against the Routes' split (off unless `prometheus.url`).
    #[serde(default)]
    pub traffic: TrafficConfig,
}

impl Config {
    /// The channels the service delivers to: the configured ones, or with none configured a
    /// `log` channel, so drifts are never dropped silently.
    pub fn effective_channels(&self) -> Vec<ChannelConfig> {
        if self.channels.is_empty() {
            vec![ChannelConfig::log("log")]
        } else {
            self.channels.clone()
        }
    }

    /// The router of the configured routes over [`Config::effective_channels`].
    pub fn router(&self) -> crate::route::Router {
        routes::router(&self.routes, &self.effective_channels())
    }
}

fn default_cluster_name() -> String {
    "default".to_string()
}

/// Public UI base URL, used for links in messages.
fn default_public_url() -> Option<String> {
    None
}

#[cfg(test)]
mod tests;
