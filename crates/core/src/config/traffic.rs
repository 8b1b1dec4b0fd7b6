//! `traffic:`: served traffic as Prometheus counts it, compared with the Routes' declared split
//! (`traffic_share_drift`, issue 32). Off unless `prometheus.url` is set. Not hot-reloaded: the
//! poller that runs the query is started with the writer role.
//!
//! The query is one instant PromQL query returning requests per (namespace, service, revision)
//! over `window`: a preset for each era of Knative's queue-proxy request metrics, or a query
//! of one's own (`query`) with the placeholders `{window}` and `{cluster}`.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

pub use crate::classify::traffic::promql_duration;

use super::{de_duration, Error, ResyncConfig, Secret, ShardConfig};

/// The `traffic:` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrafficConfig {
    /// The Prometheus server to ask; without its `url` the comparison is off.
    #[serde(default)]
    pub prometheus: PrometheusConfig,
    /// Time between two queries.
    #[serde(default = "default_interval", deserialize_with = "de_duration")]
    pub interval: Duration,
    /// The window the requests are counted over (`increase(...[window])`).
    #[serde(default = "default_window", deserialize_with = "de_duration")]
    pub window: Duration,
    /// How far, in percentage points, a Revision's observed share may be from its declared
    /// percent.
    #[serde(default = "default_tolerance")]
    pub tolerance_percent: f64,
    /// Fewest requests (all Revisions of a Route together) in the window for a verdict.
    #[serde(default = "default_min_requests")]
    pub min_requests: u64,
    /// Which metrics the query reads: one of [`PRESETS`]' names. Required unless `query` is set.
    #[serde(default)]
    pub preset: Option<String>,
    /// A PromQL query of one's own, instead of the preset's; `{window}` and `{cluster}` are
    /// replaced. Its series must carry a namespace, a service and a revision label (each under
    /// one of the names in [`NAMESPACE_LABELS`], [`SERVICE_LABELS`], [`REVISION_LABELS`]).
    #[serde(default)]
    pub query: Option<String>,
    /// The cluster name the observations are filed under; unset: `resync.cluster`, else
    /// `defaultCluster` (the name this cluster's events carry).
    #[serde(default)]
    pub cluster: Option<String>,
}

/// `traffic.prometheus`: where the query goes and how it authenticates.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrometheusConfig {
    /// The server's base URL (`/api/v1/query` is appended), e.g. `http://prometheus:9090`.
    #[serde(default)]
    pub url: Option<String>,
    /// A bearer token sent with every query.
    #[serde(default)]
    pub bearer_token: Option<Secret>,
    /// A file holding the bearer token, read at every query (a projected token rotates), as
    /// `auth.oidc.tokenFile`.
    #[serde(default)]
    pub bearer_token_file: Option<PathBuf>,
    /// A PEM bundle to trust for the server's TLS.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// How long one query may take (also sent to Prometheus as its `timeout`).
    #[serde(default = "default_timeout", deserialize_with = "de_duration")]
    pub timeout: Duration,
}

fn default_interval() -> Duration {
    Duration::from_secs(60)
}
fn default_window() -> Duration {
    Duration::from_secs(600)
}
fn default_tolerance() -> f64 {
    15.0
}
fn default_min_requests() -> u64 {
    100
}
fn default_timeout() -> Duration {
    Duration::from_secs(10)
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        PrometheusConfig {
            url: None,
            bearer_token: None,
            bearer_token_file: None,
            ca_file: None,
            timeout: default_timeout(),
        }
    }
}

impl Default for TrafficConfig {
    fn default() -> Self {
        TrafficConfig {
            prometheus: PrometheusConfig::default(),
            interval: default_interval(),
            window: default_window(),
            tolerance_percent: default_tolerance(),
            min_requests: default_min_requests(),
            preset: None,
            query: None,
            cluster: None,
        }
    }
}

/// Label names read as the namespace, in order of preference: the preset's
/// `sum by (...)` keeps exactly one of them.
pub const NAMESPACE_LABELS: &[&str] = &["namespace", "namespace_name", "k8s_namespace_name"];
/// Label names read as the Knative Service.
pub const SERVICE_LABELS: &[&str] = &["service", "service_name", "kn_service_name"];
/// Label names read as the Revision.
pub const REVISION_LABELS: &[&str] = &["revision", "revision_name", "kn_revision_name"];

/// One preset: a name and its query (with `{window}`), and what the cluster must be set to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// The name `traffic.preset` takes.
    pub name: &'static str,
    /// The PromQL, with `{window}`.
    pub query: &'static str,
    /// What it expects of the cluster (for the docs and the error that lists presets).
    pub expects: &'static str,
}

/// The OTel scrape join: the revision is a resource attribute, which the Prometheus exporter puts
/// only on `target_info` of the same scrape target (job, instance). Joined with every
/// `target_info` of the window, not only the current one: a pod gone within the window (a canary
/// scaled to zero) still served its requests, and a join with the current `target_info` would
/// lose them ("served nothing").
macro_rules! otel_scrape {
    ($metric:literal) => {
        concat!(
            "sum by (k8s_namespace_name, kn_service_name, kn_revision_name) (increase(",
            $metric,
            "[{window}]) * on (job, instance) group_left (k8s_namespace_name, kn_service_name, kn_revision_name) group by (job, instance, k8s_namespace_name, kn_service_name, kn_revision_name) (last_over_time(target_info[{window}])))"
        )
    };
}

/// An OTLP push with promoted resource attributes: the series carry the names themselves.
macro_rules! otel_push {
    ($metric:literal) => {
        concat!(
            "sum by (k8s_namespace_name, kn_service_name, kn_revision_name) (increase(",
            $metric,
            "[{window}]))"
        )
    };
}

/// The presets, one per era of queue-proxy's request counter (see the README's "Served
/// traffic"): OpenCensus up to 1.18; OpenTelemetry in 1.19 and 1.20, renamed in 1.21, each
/// scraped (`target_info` joined) or pushed (resource attributes promoted).
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "knative-1.18",
        query: "sum by (namespace_name, service_name, revision_name) (increase(revision_request_count[{window}]))",
        expects: "Knative Serving <= 1.18: queue-proxy's OpenCensus metrics scraped on :9091",
    },
    Preset {
        name: "knative-1.19-scrape",
        query: otel_scrape!("kn_queueproxy_app_duration_seconds_count"),
        expects: "Knative Serving 1.19-1.20, request-metrics-protocol: prometheus (scraped on :9091)",
    },
    Preset {
        name: "knative-1.19-push",
        query: otel_push!("kn_queueproxy_app_duration_seconds_count"),
        expects: "Knative Serving 1.19-1.20, request-metrics-protocol: http/protobuf to an OTLP receiver promoting kn.* and k8s.namespace.name",
    },
    Preset {
        name: "knative-1.21-scrape",
        query: otel_scrape!("kn_serving_invocation_duration_seconds_count"),
        expects: "Knative Serving >= 1.21, request-metrics-protocol: prometheus (scraped on :9091)",
    },
    Preset {
        name: "knative-1.21-push",
        query: otel_push!("kn_serving_invocation_duration_seconds_count"),
        expects: "Knative Serving >= 1.21, request-metrics-protocol: http/protobuf to an OTLP receiver promoting kn.* and k8s.namespace.name",
    },
];

/// The preset with this name.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|preset| preset.name == name)
}

impl TrafficConfig {
    /// True when the comparison runs (`prometheus.url` is set).
    pub fn enabled(&self) -> bool {
        self.prometheus.url.is_some()
    }

    /// The cluster the observations are filed under.
    pub fn cluster_name(&self, resync: &ResyncConfig, default_cluster: &str) -> String {
        self.cluster
            .as_deref()
            .or(resync.cluster.as_deref())
            .filter(|name| !name.trim().is_empty())
            .unwrap_or(default_cluster)
            .to_string()
    }

    /// The PromQL that runs: `query`, else the preset's, with its placeholders replaced.
    pub fn promql(&self, cluster: &str) -> Option<String> {
        let template = match &self.query {
            Some(query) => query.as_str(),
            None => preset(self.preset.as_deref()?)?.query,
        };
        Some(
            template
                .replace("{window}", &promql_duration(self.window))
                .replace("{cluster}", cluster),
        )
    }

    /// Checks the section; every error names its key path. The cluster the observations are
    /// filed under must be one this shard owns: another shard's Routes are not in its engine.
    pub(super) fn validate(
        &self,
        shard: &ShardConfig,
        resync: &ResyncConfig,
        default_cluster: &str,
    ) -> Result<(), Error> {
        let set_without_url = self.preset.is_some()
            || self.query.is_some()
            || self.prometheus.bearer_token.is_some()
            || self.prometheus.bearer_token_file.is_some()
            || self.prometheus.ca_file.is_some();
        let Some(url) = &self.prometheus.url else {
            if set_without_url {
                return Err(Error::invalid(
                    "traffic.prometheus.url",
                    "must be set for the rest of the traffic section to apply",
                ));
            }
            return Ok(());
        };
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"));
        if rest.is_none_or(|rest| rest.is_empty() || rest.starts_with('/')) {
            // Never the value: a URL can carry credentials.
            return Err(Error::invalid(
                "traffic.prometheus.url",
                "must be an http:// or https:// URL with a host",
            ));
        }
        if url.contains('?') || url.contains('#') {
            return Err(Error::invalid(
                "traffic.prometheus.url",
                "must be a base URL without query or fragment (/api/v1/query is appended)",
            ));
        }
        let prometheus = &self.prometheus;
        if prometheus
            .bearer_token
            .as_ref()
            .is_some_and(Secret::is_blank)
        {
            return Err(Error::invalid(
                "traffic.prometheus.bearerToken",
                "is empty or only whitespace (a ${VAR} set to nothing or a newline?)",
            ));
        }
        if prometheus.bearer_token.is_some() && prometheus.bearer_token_file.is_some() {
            return Err(Error::invalid(
                "traffic.prometheus.bearerTokenFile",
                "set either bearerToken or bearerTokenFile, not both",
            ));
        }
        for (key, path) in [
            (
                "traffic.prometheus.bearerTokenFile",
                &prometheus.bearer_token_file,
            ),
            ("traffic.prometheus.caFile", &prometheus.ca_file),
        ] {
            if path
                .as_ref()
                .is_some_and(|path| path.as_os_str().is_empty())
            {
                return Err(Error::invalid(key, "must not be empty"));
            }
        }
        if prometheus.timeout < Duration::from_millis(100) {
            return Err(Error::invalid(
                "traffic.prometheus.timeout",
                "must be at least 100ms",
            ));
        }
        if self.interval < Duration::from_secs(1) {
            return Err(Error::invalid("traffic.interval", "must be at least 1s"));
        }
        if self.window < Duration::from_secs(1) {
            return Err(Error::invalid("traffic.window", "must be at least 1s"));
        }
        if self.interval > self.window {
            return Err(Error::invalid(
                "traffic.interval",
                "must not be longer than traffic.window: requests between two windows would never be counted",
            ));
        }
        if !(0.0..=100.0).contains(&self.tolerance_percent) {
            return Err(Error::invalid(
                "traffic.tolerancePercent",
                "must be between 0 and 100",
            ));
        }
        if self.min_requests == 0 {
            return Err(Error::invalid(
                "traffic.minRequests",
                "must be at least 1 (no requests tell nothing about a split)",
            ));
        }
        if let Some(name) = self.cluster.as_deref() {
            crate::decode::cluster_name::check(name).map_err(|error| {
                Error::invalid("traffic.cluster", format!("cluster name {error}"))
            })?;
        }
        let cluster = self.cluster_name(resync, default_cluster);
        if !shard.owns(&cluster) {
            return Err(Error::invalid(
                if self.cluster.is_some() { "traffic.cluster" } else { "traffic.prometheus.url" },
                format!(
                    "observations are filed under cluster {cluster:?}, which this shard does not own (shard.clusters): run the traffic section in that cluster's shard, or set traffic.cluster"
                ),
            ));
        }
        match (&self.preset, &self.query) {
            (Some(_), Some(_)) => Err(Error::invalid(
                "traffic.query",
                "set either traffic.preset or traffic.query, not both",
            )),
            (None, None) => Err(Error::invalid(
                "traffic.preset",
                format!(
                    "must name the metrics to read (request metrics differ by Knative release): one of {}, or set traffic.query",
                    preset_names()
                ),
            )),
            (Some(name), None) if preset(name).is_none() => Err(Error::invalid(
                "traffic.preset",
                format!("unknown preset {name:?}; known: {}", preset_names()),
            )),
            (None, Some(query)) if query.trim().is_empty() => {
                Err(Error::invalid("traffic.query", "must not be empty"))
            }
            _ => Ok(()),
        }
    }
}

fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|preset| preset.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(yaml: &str) -> Result<super::super::Config, Error> {
        super::super::load_str(yaml, &|_| None)
    }

    fn error(yaml: &str) -> String {
        load(yaml).unwrap_err().to_string()
    }

    #[test]
    fn off_without_a_url_and_defaults_as_documented() {
        let config = load("").unwrap();
        assert!(!config.traffic.enabled());
        let traffic = &config.traffic;
        assert_eq!(traffic.interval, Duration::from_secs(60));
        assert_eq!(traffic.window, Duration::from_secs(600));
        assert_eq!(traffic.tolerance_percent, 15.0);
        assert_eq!(traffic.min_requests, 100);
        assert_eq!(traffic.prometheus.timeout, Duration::from_secs(10));
    }

    #[test]
    fn each_preset_names_its_metric_and_the_window() {
        let config = load(
            "traffic:\n  prometheus: {url: 'http://prometheus:9090'}\n  preset: knative-1.18\n  window: 5m\n",
        )
        .unwrap();
        assert!(config.traffic.enabled());
        assert_eq!(
            config.traffic.promql("default").unwrap(),
            "sum by (namespace_name, service_name, revision_name) (increase(revision_request_count[300s]))"
        );
        let query = |name: &str| {
            let mut traffic = config.traffic.clone();
            traffic.preset = Some(name.to_string());
            traffic.promql("default").unwrap()
        };
        assert!(query("knative-1.19-scrape").contains(
            "increase(kn_queueproxy_app_duration_seconds_count[300s]) * on (job, instance) group_left (k8s_namespace_name, kn_service_name, kn_revision_name) group by (job, instance, k8s_namespace_name, kn_service_name, kn_revision_name) (last_over_time(target_info[300s]))"
        ));
        assert!(query("knative-1.21-scrape")
            .contains("kn_serving_invocation_duration_seconds_count[300s]) * on (job, instance)"));
        for push in ["knative-1.19-push", "knative-1.21-push"] {
            assert!(!query(push).contains("target_info"), "{push}");
            assert!(query(push)
                .starts_with("sum by (k8s_namespace_name, kn_service_name, kn_revision_name)"));
        }
        // Every preset's series carry one label of each kind the poller reads.
        for preset in PRESETS {
            let by = preset.query.split(')').next().unwrap();
            for labels in [NAMESPACE_LABELS, SERVICE_LABELS, REVISION_LABELS] {
                assert!(
                    labels.iter().any(|label| by.contains(label)),
                    "{}",
                    preset.name
                );
            }
        }
    }

    #[test]
    fn a_query_of_ones_own_replaces_the_placeholders() {
        let config = load(
            "defaultCluster: east\ntraffic:\n  prometheus: {url: 'https://prom.example'}\n  window: 90s\n  query: 'sum by (namespace, service, revision) (increase(requests{cluster=\"{cluster}\"}[{window}]))'\n",
        )
        .unwrap();
        let cluster = config
            .traffic
            .cluster_name(&config.resync, &config.default_cluster);
        assert_eq!(cluster, "east");
        assert_eq!(
            config.traffic.promql(&cluster).unwrap(),
            "sum by (namespace, service, revision) (increase(requests{cluster=\"east\"}[90s]))"
        );
        let config = load(
            "resync: {cluster: west}\ntraffic:\n  prometheus: {url: 'http://p:9090'}\n  preset: knative-1.21-push\n",
        )
        .unwrap();
        assert_eq!(
            config
                .traffic
                .cluster_name(&config.resync, &config.default_cluster),
            "west"
        );
    }

    #[test]
    fn errors_name_their_key() {
        let base = "traffic:\n  prometheus: {url: 'http://p:9090'}\n";
        for (extra, key) in [
            ("  window: 0s\n  preset: knative-1.18\n", "traffic.window:"),
            (
                "  interval: 0s\n  preset: knative-1.18\n",
                "traffic.interval:",
            ),
            (
                "  interval: 15m\n  window: 10m\n  preset: knative-1.18\n",
                "traffic.interval: must not be longer than traffic.window",
            ),
            (
                "  tolerancePercent: 101\n  preset: knative-1.18\n",
                "traffic.tolerancePercent:",
            ),
            (
                "  minRequests: 0\n  preset: knative-1.18\n",
                "traffic.minRequests:",
            ),
            ("  preset: knative-2\n", "traffic.preset:"),
            ("", "traffic.preset:"),
            ("  preset: knative-1.18\n  query: up\n", "traffic.query:"),
            ("  query: ' '\n", "traffic.query:"),
            (
                "  preset: knative-1.18\n  cluster: 'fleet:x'\n",
                "traffic.cluster:",
            ),
        ] {
            let message = error(&format!("{base}{extra}"));
            assert!(message.starts_with(key), "{extra:?}: {message}");
        }
        assert!(error("traffic:\n  preset: knative-1.18\n").starts_with("traffic.prometheus.url:"));
        let shard =
            "store: {url: 'postgres://u@db/ds'}\nshard: {name: east, clusters: ['east-*']}\nresync: {enabled: false}\n";
        let message = error(&format!(
            "{shard}defaultCluster: west\n{base}  preset: knative-1.18\n"
        ));
        assert!(message.starts_with("traffic.prometheus.url:"), "{message}");
        let message = error(&format!(
            "{shard}{base}  preset: knative-1.18\n  cluster: west-1\n"
        ));
        assert!(message.starts_with("traffic.cluster:"), "{message}");
        assert!(load(&format!(
            "{shard}{base}  preset: knative-1.18\n  cluster: east-1\n"
        ))
        .is_ok());
        for url in ["prometheus:9090", "http://", "ftp://p", "http://p/?x=1"] {
            let message = error(&format!(
                "traffic:\n  prometheus: {{url: '{url}'}}\n  preset: knative-1.18\n"
            ));
            assert!(message.starts_with("traffic.prometheus.url:"), "{message}");
        }
        let message = error(
            "traffic:\n  prometheus: {url: 'http://p:9090', bearerToken: abc, bearerTokenFile: /t}\n  preset: knative-1.18\n",
        );
        assert!(
            message.starts_with("traffic.prometheus.bearerTokenFile:"),
            "{message}"
        );
        // Empty, or only whitespace (the token is sent trimmed: nothing would be left).
        for token in ["''", "\" \\n\""] {
            let message = error(&format!(
                "traffic:\n  prometheus: {{url: 'http://p:9090', bearerToken: {token}}}\n  preset: knative-1.18\n",
            ));
            assert!(
                message.starts_with("traffic.prometheus.bearerToken: is empty or only whitespace"),
                "{message}"
            );
        }
    }

    #[test]
    fn the_token_redacts_itself() {
        let config = load(
            "traffic:\n  prometheus: {url: 'http://p:9090', bearerToken: s3cr3t}\n  preset: knative-1.18\n",
        )
        .unwrap();
        let shown = format!("{:?}", config.traffic);
        assert!(!shown.contains("s3cr3t"), "{shown}");
    }
}
