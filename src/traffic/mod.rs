//! The served-traffic poller (issue 32): every `traffic.interval` one instant query to
//! Prometheus (`POST /api/v1/query`), its answer read into requests per Revision
//! (`envelope.rs`) and handed to the single writer as an observation, like an event
//! (`Pipeline::observe_traffic`), where the pure engine compares it with the Routes' splits.
//!
//! It sits outside the core and never blocks the writer: a full queue skips the tick (counted).
//! Prometheus unreachable or failing is counted by kind and logged once per outage (and once when
//! it answers again); it is never a finding, and an open drift stays as it is. The fourth place
//! that knows reqwest (ARCHITECTURE.md).

mod envelope;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::metrics::{KindLabel, Metrics};
use crate::pipeline::{self, Pipeline};
use drift_core::classify::traffic::Observation;
use drift_core::config::Config;
pub(crate) use envelope::QueryError;

/// Largest answer read (a body past it is refused, not parsed).
const MAX_BODY_BYTES: usize = 32 << 20;

/// Why the poller could not start.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// `traffic.prometheus.caFile` could not be read.
    #[error("traffic.prometheus.caFile: cannot read {path}: {error}")]
    ReadCaFile {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
    /// `traffic.prometheus.caFile` holds no usable PEM certificate.
    #[error("traffic.prometheus.caFile: not a PEM certificate bundle: {0}")]
    CaFile(reqwest::Error),
    /// `traffic.prometheus.bearerTokenFile` could not be read.
    #[error("traffic.prometheus.bearerTokenFile: cannot read {path}: {error}")]
    ReadTokenFile {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
    /// `traffic.prometheus.bearerTokenFile` holds no token (empty, or only whitespace).
    #[error("traffic.prometheus.bearerTokenFile: {} is empty", .0.display())]
    EmptyTokenFile(std::path::PathBuf),
    /// The HTTP client could not be built.
    #[error("traffic.prometheus: cannot build the HTTP client: {0}")]
    Client(reqwest::Error),
}

/// The HTTP client of the `traffic:` section, trusting `caFile`'s certificates.
fn client(traffic: &drift_core::config::TrafficConfig) -> Result<reqwest::Client, SetupError> {
    let mut builder = reqwest::Client::builder()
        .timeout(traffic.prometheus.timeout)
        .redirect(reqwest::redirect::Policy::none());
    if let Some(path) = &traffic.prometheus.ca_file {
        let pem = std::fs::read(path).map_err(|error| SetupError::ReadCaFile {
            path: path.clone(),
            error,
        })?;
        for certificate in
            reqwest::Certificate::from_pem_bundle(&pem).map_err(SetupError::CaFile)?
        {
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder.build().map_err(SetupError::Client)
}

/// What `config validate` checks of the `traffic:` section beyond the config itself: the files
/// it names can be read (the CA bundle parsed), as the service will at start (the token file is
/// read again at every query, so it may be rotated).
pub fn check_files(config: &Config) -> Result<(), SetupError> {
    let traffic = &config.traffic;
    if traffic.prometheus.url.is_none() {
        return Ok(());
    }
    client(traffic)?;
    if let Some(path) = &traffic.prometheus.bearer_token_file {
        let token = std::fs::read(path).map_err(|error| SetupError::ReadTokenFile {
            path: path.clone(),
            error,
        })?;
        // Every query would fail on it (`token_file`).
        if token.trim_ascii().is_empty() {
            return Err(SetupError::EmptyTokenFile(path.clone()));
        }
    }
    Ok(())
}

/// The poller's settings, from the `traffic:` section.
pub struct Poller {
    client: reqwest::Client,
    endpoint: String,
    bearer_token: Option<drift_core::config::Secret>,
    bearer_token_file: Option<std::path::PathBuf>,
    timeout: Duration,
    interval: Duration,
    query: String,
    /// What the preset expects of the cluster (logged at start: no series often means this
    /// is not set up).
    expects: &'static str,
    template: Observation,
    pipeline: Pipeline,
    metrics: Arc<Metrics>,
}

impl Poller {
    /// The poller of `config`'s `traffic:` section, or `None` when it is off.
    pub fn new(
        config: &Config,
        pipeline: Pipeline,
        metrics: Arc<Metrics>,
    ) -> Result<Option<Poller>, SetupError> {
        let traffic = &config.traffic;
        let Some(url) = &traffic.prometheus.url else {
            return Ok(None);
        };
        let cluster = traffic.cluster_name(&config.resync, &config.default_cluster);
        let Some(query) = traffic.promql(&cluster) else {
            // Validation requires a preset or a query; nothing to run without one.
            return Ok(None);
        };
        let client = client(traffic)?;
        Ok(Some(Poller {
            client,
            endpoint: format!("{}/api/v1/query", url.trim_end_matches('/')),
            bearer_token: (traffic.prometheus.bearer_token.as_ref())
                .map(drift_core::config::Secret::trimmed),
            bearer_token_file: traffic.prometheus.bearer_token_file.clone(),
            timeout: traffic.prometheus.timeout,
            interval: traffic.interval,
            query: query.clone(),
            expects: match (&traffic.query, traffic.preset.as_deref()) {
                (None, Some(name)) => drift_core::config::preset(name)
                    .map(|preset| preset.expects)
                    .unwrap_or_default(),
                _ => "a query of one's own (traffic.query)",
            },
            template: Observation {
                cluster,
                query,
                window: traffic.window,
                tolerance_percent: traffic.tolerance_percent,
                min_requests: traffic.min_requests,
                series: Vec::new(),
            },
            pipeline,
            metrics,
        }))
    }

    /// Runs one query: the requests per Revision Prometheus counts now.
    async fn query(&self) -> Result<Vec<drift_core::classify::traffic::Served>, QueryError> {
        let timeout = drift_core::config::promql_duration(self.timeout);
        let mut request = self.client.post(&self.endpoint).form(&[
            ("query", self.query.as_str()),
            ("timeout", timeout.as_str()),
        ]);
        if let Some(token) = &self.bearer_token {
            request = request.bearer_auth(token.expose());
        } else if let Some(path) = &self.bearer_token_file {
            // Read at every query: a projected token rotates.
            let token = std::fs::read_to_string(path).map_err(|error| {
                QueryError::TokenFile(format!(
                    "cannot read traffic.prometheus.bearerTokenFile {}: {error}",
                    path.display()
                ))
            })?;
            // An empty file (a hand-made one being rewritten) would send `Bearer ` and be
            // counted as Prometheus refusing the query: the file is named instead.
            let token = token.trim();
            if token.is_empty() {
                return Err(QueryError::TokenFile(format!(
                    "traffic.prometheus.bearerTokenFile {} is empty",
                    path.display()
                )));
            }
            request = request.bearer_auth(token);
        }
        // Errors without the URL: it may carry credentials.
        let mut response = request
            .send()
            .await
            .map_err(|error| QueryError::Unreachable(error.without_url().to_string()))?;
        let status = response.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| QueryError::Unreachable(error.without_url().to_string()))?
        {
            if body.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(QueryError::InvalidResponse(format!(
                    "the answer is larger than {MAX_BODY_BYTES} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        envelope::parse(status, &body)
    }

    /// `traffic_prometheus_up` of the cluster observations are filed under.
    fn prometheus_up(&self) -> prometheus_client::metrics::gauge::Gauge {
        self.metrics
            .traffic_prometheus_up
            .get_or_create(&crate::metrics::ClusterLabel {
                cluster: self.template.cluster.clone(),
            })
            .clone()
    }

    /// Queries every `interval` until `stop`; the first query at once.
    pub async fn run(self, stop: CancellationToken) {
        tracing::info!(
            message = "Served traffic: querying Prometheus.",
            interval = ?self.interval,
            window = ?self.template.window,
            cluster = %self.template.cluster,
            query = %self.query,
            expects = self.expects,
        );
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut outage = Outage::default();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let answer = tokio::select! {
                _ = stop.cancelled() => return,
                answer = self.query() => answer,
            };
            match answer {
                Ok(series) => {
                    self.metrics.traffic_queries.inc();
                    self.prometheus_up().set(1);
                    if let Some(failed) = outage.answered() {
                        tracing::info!(
                            message = "Prometheus answers the served-traffic query again.",
                            failed_queries = failed,
                        );
                    }
                    let observation = Observation {
                        series,
                        ..self.template.clone()
                    };
                    match self.pipeline.observe_traffic(observation) {
                        Ok(()) => {}
                        Err(pipeline::Error::Stopped) => return,
                        Err(_) => {
                            self.metrics.traffic_observations_skipped.inc();
                        }
                    }
                }
                Err(error) => {
                    self.metrics
                        .traffic_query_errors
                        .get_or_create(&KindLabel::new(error.kind()))
                        .inc();
                    self.prometheus_up().set(0);
                    if outage.failed() {
                        // Once per outage: every tick of a long one would flood the log.
                        tracing::warn!(
                            message = "The served-traffic query failed; no traffic finding changes until Prometheus answers (logged once per outage).",
                            kind = error.kind(),
                            %error,
                        );
                    }
                }
            }
        }
    }
}

/// An outage of Prometheus as the log tells it: one line when it begins, one when it ends.
#[derive(Debug, Default)]
struct Outage {
    /// Queries failed in a row.
    failed: u64,
}

impl Outage {
    /// A query failed: true when this begins an outage (the one line to log).
    fn failed(&mut self) -> bool {
        self.failed += 1;
        self.failed == 1
    }

    /// A query was answered: how many failed before it, when this ends an outage.
    fn answered(&mut self) -> Option<u64> {
        let failed = std::mem::take(&mut self.failed);
        (failed > 0).then_some(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::Outage;

    #[test]
    fn an_outage_is_logged_once_when_it_begins_and_once_when_it_ends() {
        let mut outage = Outage::default();
        assert_eq!(outage.answered(), None, "no outage to end");
        assert!(outage.failed(), "the first failure begins it");
        assert!(!outage.failed());
        assert!(!outage.failed());
        assert_eq!(outage.answered(), Some(3));
        assert_eq!(outage.answered(), None);
        assert!(outage.failed(), "the next failure begins another");
    }
}
