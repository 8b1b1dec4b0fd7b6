//! `server:`, `store:`, `api:` and `auth:`: how the process listens, stores and lets people in.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{de_duration, Secret};

/// Largest request bodies held in flight at once by default: `server.inFlightBytes` is this many
/// times `server.bodyLimitBytes` unless set.
pub const IN_FLIGHT_BODIES: usize = 16;

/// Default `server.headerReadTimeout`: a request head on the cluster network takes
/// milliseconds; ten seconds leaves room for a stalled node and frees a slowloris connection.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Default `server.idleTimeout`: long enough that a Broker dispatcher or Prometheus (scraping
/// every 15 to 60 s) reuses its connection, short enough that idle connections do not pile up.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(75);

/// Default `server.maxConnections`: well under the usual open-file limit of a container (1024),
/// leaving room for the store's files and the channels' connections, and far above what the
/// Broker's dispatchers and Prometheus open.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// Default `server.bodyReadTimeout`: a 4 MiB body crosses a cluster network in well under a
/// second.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Default `server.bodyMinBytesPerSecond` (64 KiB/s): a body still arriving after
/// `bodyReadTimeout` must have averaged this rate since.
pub const DEFAULT_BODY_MIN_BYTES_PER_SECOND: u64 = 64 * 1024;

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
    /// Request bytes held in flight at once (the bytes of bodies that arrived, until their
    /// request is answered); a request that does not fit is answered `503` before its body is
    /// read. Unset: 16 × `bodyLimitBytes`.
    #[serde(default)]
    pub in_flight_bytes: Option<usize>,
    /// Time for a request head: from the accept for a connection's first request, from the
    /// first byte for the next ones. The connection is closed when it runs out.
    #[serde(
        default = "default_header_read_timeout",
        deserialize_with = "de_duration"
    )]
    pub header_read_timeout: Duration,
    /// Time a kept-alive connection may wait for its next request to begin before it is closed.
    #[serde(default = "default_idle_timeout", deserialize_with = "de_duration")]
    pub idle_timeout: Duration,
    /// Connections open at once. A connection accepted at the cap closes the one that waited
    /// longest without a request in flight, else the one whose request body has been arriving
    /// longest, else the oldest after its answer.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Time a request body gets from when it is first read, plus one second for every
    /// `bodyMinBytesPerSecond` bytes received, and the longest pause between two of its pieces;
    /// a slower sender is cut off with `408`.
    #[serde(
        default = "default_body_read_timeout",
        deserialize_with = "de_duration"
    )]
    pub body_read_timeout: Duration,
    /// The minimum average rate of a body still arriving after `bodyReadTimeout`.
    #[serde(default = "default_body_min_bytes_per_second")]
    pub body_min_bytes_per_second: u64,
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
fn default_header_read_timeout() -> Duration {
    DEFAULT_HEADER_READ_TIMEOUT
}
fn default_idle_timeout() -> Duration {
    DEFAULT_IDLE_TIMEOUT
}
fn default_max_connections() -> usize {
    DEFAULT_MAX_CONNECTIONS
}
fn default_body_read_timeout() -> Duration {
    DEFAULT_BODY_READ_TIMEOUT
}
fn default_body_min_bytes_per_second() -> u64 {
    DEFAULT_BODY_MIN_BYTES_PER_SECOND
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
            header_read_timeout: default_header_read_timeout(),
            idle_timeout: default_idle_timeout(),
            max_connections: default_max_connections(),
            body_read_timeout: default_body_read_timeout(),
            body_min_bytes_per_second: default_body_min_bytes_per_second(),
        }
    }
}

/// The store: one SQLite file (`path`, the default) or a PostgreSQL database (`url`).
///
/// Deserialized through [`StoreWire`] so validation can tell a `path` written in the file from
/// the default one: setting both `path` and `url` is an error naming the two keys.
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "StoreWire")]
pub struct StoreConfig {
    /// Path of the SQLite file (created if missing; WAL mode).
    pub path: PathBuf,
    /// True when the file set `store.path` (not the default).
    pub path_set: bool,
    /// A PostgreSQL connection URL (`postgres://user@host:5432/db?sslmode=require`): when set,
    /// the store is that database instead of the SQLite file. A secret: it may hold a password.
    pub url: Option<Secret>,
    /// The PostgreSQL password, when kept out of `url` (`password: ${PGPASSWORD}`); it wins over
    /// a password in the URL and needs no percent-encoding.
    pub password: Option<Secret>,
    /// A PEM bundle of CA certificates trusted for the PostgreSQL server's TLS certificate,
    /// besides the Mozilla roots (a private CA, a cloud provider's server CA).
    pub ca_file: Option<PathBuf>,
    /// How long a CloudEvent's key (`time`, `source`, `id`) is remembered for de-duplication.
    /// The Broker's retries span minutes; a day leaves a wide margin.
    pub dedup_retention: Duration,
    /// How long resolved drifts, their history and finished deliveries are kept (audit trail).
    pub retention: Duration,
    /// The writer lease of a PostgreSQL store (`store.lease`): with several replicas on one
    /// database, the holder is the shard's one writer.
    pub lease: LeaseConfig,
    /// True when the file set `store.lease` (an error with SQLite).
    pub lease_set: bool,
}

/// `store.lease`: how the replicas of a shard choose their writer (PostgreSQL only).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaseConfig {
    /// How long the lease holds without a renewal: a standby takes over this long after the
    /// writer's last renewal (a SIGKILL, a lost node, a partition from the database).
    #[serde(default = "default_lease_ttl", deserialize_with = "de_duration")]
    pub ttl: Duration,
    /// How often the writer renews the lease; a writer that could not renew it by
    /// `ttl - renewInterval` after the last renewal gives the writer role up itself.
    #[serde(default = "default_lease_renew", deserialize_with = "de_duration")]
    pub renew_interval: Duration,
    /// How often a standby tries to take the lease.
    #[serde(default = "default_lease_retry", deserialize_with = "de_duration")]
    pub retry_interval: Duration,
}

fn default_lease_ttl() -> Duration {
    Duration::from_secs(10)
}
fn default_lease_renew() -> Duration {
    Duration::from_secs(2)
}
fn default_lease_retry() -> Duration {
    Duration::from_secs(1)
}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig {
            ttl: default_lease_ttl(),
            renew_interval: default_lease_renew(),
            retry_interval: default_lease_retry(),
        }
    }
}

impl StoreConfig {
    /// Where the store is, for messages: the SQLite file, or the PostgreSQL server and database
    /// without user or password.
    pub fn location(&self) -> String {
        match &self.url {
            Some(url) => describe_url(url.expose()),
            None => self.path.display().to_string(),
        }
    }
}

/// The schemes a PostgreSQL `store.url` may have.
pub(super) const POSTGRES_SCHEMES: [&str; 2] = ["postgres", "postgresql"];

/// A PostgreSQL URL without its user and password: scheme, host, port and database.
pub(super) fn describe_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => {
            let port = parsed
                .port()
                .map(|port| format!(":{port}"))
                .unwrap_or_default();
            // A Unix socket's directory comes as `?host=/run/postgresql`: shown in brackets.
            let host = match parsed.host_str() {
                Some(host) if !host.is_empty() => host.to_string(),
                _ => parsed
                    .query_pairs()
                    .find(|(key, _)| key == "host")
                    .map(|(_, value)| format!("[{value}]"))
                    .unwrap_or_default(),
            };
            format!("{}://{host}{port}{}", parsed.scheme(), parsed.path())
        }
        Err(_) => "store.url (not a URL)".to_string(),
    }
}

/// Why a text cannot be a PostgreSQL store URL. The message never repeats the URL, which may
/// hold a password.
#[derive(Debug, thiserror::Error)]
pub enum StoreUrlError {
    /// Not a URL at all.
    #[error("not a URL: {0}")]
    NotUrl(#[source] url::ParseError),
    /// A URL of another scheme.
    #[error("the scheme must be postgres:// or postgresql://, not {scheme}://")]
    Scheme {
        /// The URL's scheme.
        scheme: String,
    },
    /// An `sslmode` the store does not understand (`verify-full`, ...).
    #[error(
        "sslmode={value} is not understood: use sslmode=require with store.caFile \
         (require verifies the certificate and host name, as verify-full does)"
    )]
    SslMode {
        /// The `sslmode` given.
        value: String,
    },
    /// `sslrootcert`, `sslcert` or `sslkey`: files the store does not read from the URL.
    #[error(
        "{key} is not understood: a private CA goes in store.caFile; client \
         certificates are not supported"
    )]
    CertificateOption {
        /// The option given.
        key: String,
    },
}

impl StoreUrlError {
    /// A stable, bounded label.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreUrlError::NotUrl(_) => "not_url",
            StoreUrlError::Scheme { .. } => "scheme",
            StoreUrlError::SslMode { .. } => "sslmode",
            StoreUrlError::CertificateOption { .. } => "certificate_option",
        }
    }
}

/// Why `url` cannot be a PostgreSQL store URL; the reason never repeats the URL, which may hold
/// a password. (The connection options are checked by the store when it opens.)
pub fn check_store_url(url: &str) -> Result<(), StoreUrlError> {
    let parsed = url::Url::parse(url).map_err(StoreUrlError::NotUrl)?;
    if !POSTGRES_SCHEMES.contains(&parsed.scheme()) {
        return Err(StoreUrlError::Scheme {
            scheme: parsed.scheme().to_string(),
        });
    }
    for (key, value) in parsed.query_pairs() {
        match key.as_ref() {
            "sslmode" if !["disable", "prefer", "require"].contains(&value.as_ref()) => {
                return Err(StoreUrlError::SslMode {
                    value: value.into_owned(),
                });
            }
            "sslrootcert" | "sslcert" | "sslkey" => {
                return Err(StoreUrlError::CertificateOption {
                    key: key.into_owned(),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

/// `store:` as written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StoreWire {
    #[serde(default)]
    path: Option<PathBuf>,
    #[serde(default)]
    url: Option<Secret>,
    #[serde(default)]
    password: Option<Secret>,
    #[serde(default)]
    ca_file: Option<PathBuf>,
    #[serde(default = "default_dedup_retention", deserialize_with = "de_duration")]
    dedup_retention: Duration,
    #[serde(default = "default_retention", deserialize_with = "de_duration")]
    retention: Duration,
    #[serde(default)]
    lease: Option<LeaseConfig>,
}

impl From<StoreWire> for StoreConfig {
    fn from(wire: StoreWire) -> StoreConfig {
        StoreConfig {
            path_set: wire.path.is_some(),
            path: wire.path.unwrap_or_else(default_store_path),
            url: wire.url,
            password: wire.password,
            ca_file: wire.ca_file,
            dedup_retention: wire.dedup_retention,
            retention: wire.retention,
            lease_set: wire.lease.is_some(),
            lease: wire.lease.unwrap_or_default(),
        }
    }
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
            path_set: false,
            url: None,
            password: None,
            ca_file: None,
            dedup_retention: default_dedup_retention(),
            retention: default_retention(),
            lease_set: false,
            lease: LeaseConfig::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_url_errors_have_stable_kinds_and_never_repeat_the_url() {
        assert!(check_store_url("postgres://u:secret@db/d?sslmode=require").is_ok());
        let cases = [
            ("not a url", "not_url"),
            ("mysql://u:secret@db/d", "scheme"),
            ("postgres://u:secret@db/d?sslmode=verify-full", "sslmode"),
            ("postgresql://u:secret@db/d?sslkey=/k", "certificate_option"),
        ];
        for (url, kind) in cases {
            let error = check_store_url(url).unwrap_err();
            assert_eq!(error.kind(), kind, "{url}");
            assert!(!error.to_string().contains("secret"), "{url}: {error}");
        }
        assert_eq!(
            check_store_url("not a url").unwrap_err().to_string(),
            "not a URL: relative URL without a base"
        );
        assert_eq!(
            check_store_url("postgres://db/d?sslrootcert=/ca")
                .unwrap_err()
                .to_string(),
            "sslrootcert is not understood: a private CA goes in store.caFile; client \
             certificates are not supported"
        );
    }
}
