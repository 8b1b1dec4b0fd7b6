//! `server:`, `store:`, `api:` and `auth:`: how the process listens, stores and lets people in.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{de_duration, Secret};

/// Largest request bodies held in flight at once by default: `server.inFlightBytes` is this many
/// times `server.bodyLimitBytes` unless set.
pub const IN_FLIGHT_BODIES: usize = 16;

/// Default `auth.oidc.jwksMaxAge`: the longest a fetched JWKS is trusted, whatever the issuer's
/// `Cache-Control` says (the Kubernetes API server sends `max-age=3600`). A key the issuer
/// retires stops verifying tokens at most this long after.
pub const DEFAULT_JWKS_MAX_AGE: Duration = Duration::from_secs(300);

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
    /// The longest the fetched JWKS is trusted before it is fetched again; a shorter
    /// `Cache-Control: max-age` from the issuer wins.
    #[serde(default = "default_jwks_max_age", deserialize_with = "de_duration")]
    pub jwks_max_age: Duration,
}

fn default_jwks_max_age() -> Duration {
    DEFAULT_JWKS_MAX_AGE
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
        self.in_flight_bytes
            .unwrap_or_else(|| self.body_limit_bytes.saturating_mul(IN_FLIGHT_BODIES))
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
