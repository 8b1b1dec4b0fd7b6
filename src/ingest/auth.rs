//! Authentication of the CloudEvents ingest: Knative Eventing's OIDC sender identity, or a static
//! bearer token.
//!
//! OIDC follows Knative's own receivers (`knative/eventing` `pkg/auth/verifier.go`): the
//! `Authorization: Bearer <JWT>` header is required (`401` without it); the key comes from the
//! issuer's JWKS (discovered from `/.well-known/openid-configuration`), the signature, `iss`, `aud`,
//! `exp` and `nbf` (with a small leeway) are checked (`401` on any failure); and `sub` must be in
//! the allow-list when one is configured (`403`). The Broker does not retry `401` or `403`: a
//! misconfigured sink dead-letters every event, which the operator sees at once.
//!
//! The JWKS is cached for the issuer's `Cache-Control: max-age`, at most `auth.oidc.jwksMaxAge`
//! (at least one second), then fetched again before the next verification, so a key the issuer no
//! longer publishes stops verifying tokens within that time; when the fetch fails then, requests
//! get `503` (the Broker retries) rather than trust keys that may have been withdrawn. A token
//! naming an unknown `kid` makes one early fetch (at most one a second), which is how key rotation
//! shows up.
//!
//! A token's `alg` must be its key's: the JWK's `alg` when published, else the one its key type
//! implies (RSA: RS256, the Kubernetes issuer's; EC P-256: ES256; P-384: ES384; Ed25519: EdDSA). So
//! a PS256 or RS512 token does not verify against a key published for RS256, a key published for
//! encryption verifies nothing, and no token is ever "signed" with a public key used as an HMAC
//! secret: only asymmetric algorithms are accepted.
//!
//! This module fetches JWKS over HTTP with reqwest: the one place outside `deliver` that does,
//! because verifying a caller is the ingest's job.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use tokio::sync::RwLock;

use drift_core::config::{OidcConfig, Secret};

/// Why a caller was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No or bad credentials: `401`.
    #[error("{0}")]
    Unauthenticated(String),
    /// Valid credentials of a caller that is not allowed: `403`.
    #[error("{0}")]
    Forbidden(String),
    /// The issuer's keys cannot be fetched now: `503`, so the Broker retries instead of
    /// dead-lettering events that may be perfectly valid.
    #[error("{0}")]
    Unavailable(String),
}

/// Why an OIDC verifier cannot be built from `auth.oidc`: the service does not start.
///
/// Each variant keeps its cause and shows it in the message, but does not return it as
/// `source()`: a failed start is printed with its chain of causes (`{:#}`), which would repeat
/// it (and add reqwest's inner causes, which the message never showed).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// `auth.oidc.caFile` cannot be read.
    #[error("auth.oidc.caFile {}: {error}", path.display())]
    ReadCaFile {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        error: std::io::Error,
    },
    /// `auth.oidc.caFile` is not a PEM bundle of certificates.
    #[error("auth.oidc.caFile: {0}")]
    CaFile(reqwest::Error),
    /// The HTTP client cannot be built.
    #[error("{0}")]
    Client(reqwest::Error),
}

impl SetupError {
    /// A stable, bounded label.
    pub fn kind(&self) -> &'static str {
        match self {
            SetupError::ReadCaFile { .. } => "read_ca_file",
            SetupError::CaFile(_) => "invalid_ca_file",
            SetupError::Client(_) => "http_client",
        }
    }
}

/// How the ingest authenticates callers.
#[derive(Clone)]
pub enum IngestAuth {
    /// Anyone may post.
    Open,
    /// A static bearer token.
    Static(Secret),
    /// OIDC tokens.
    Oidc(Arc<OidcVerifier>),
}

impl IngestAuth {
    /// Checks a request's `Authorization` header.
    pub async fn check(&self, authorization: Option<&str>) -> Result<(), AuthError> {
        let token = || {
            authorization
                .and_then(bearer_credentials)
                .filter(|token| !token.is_empty())
                .ok_or_else(|| {
                    AuthError::Unauthenticated("missing Authorization: Bearer token".to_string())
                })
        };
        match self {
            IngestAuth::Open => Ok(()),
            IngestAuth::Static(expected) => {
                if same_secret(token()?, expected.expose()) {
                    Ok(())
                } else {
                    Err(AuthError::Unauthenticated(
                        "invalid bearer token".to_string(),
                    ))
                }
            }
            IngestAuth::Oidc(verifier) => {
                // The usual cause behind a Broker: Knative's sender identity is off, and the
                // dead-letter sink shows this message, so it names the fix.
                let token = token().map_err(|_| {
                    AuthError::Unauthenticated(
                        "missing Authorization: Bearer token (a Knative Broker sends one only \
                         with authentication-oidc enabled in knative-eventing/config-features \
                         and the Trigger's subscriber.audience set)"
                            .to_string(),
                    )
                })?;
                verifier.verify(token).await
            }
        }
    }
}

/// The claims checked beyond what `Validation` does.
#[derive(Debug, serde::Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<String>,
}

#[derive(Default)]
struct Cache {
    keys: Option<JwkSet>,
    /// Until when `keys` may be used.
    expires: Option<Instant>,
    jwks_url: Option<String>,
    last_attempt: Option<Instant>,
    /// Why the last fetch failed, answered again for a second rather than asking again.
    last_error: Option<Arc<JwksError>>,
    last_unknown_kid_refresh: Option<Instant>,
}

impl Cache {
    fn fresh(&self) -> bool {
        self.keys.is_some() && self.expires.is_some_and(|expires| Instant::now() < expires)
    }
}

/// Why the JWKS is fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refresh {
    /// Nothing cached, or the cached keys expired.
    Expired,
    /// A token names a `kid` the cached keys do not have.
    UnknownKid,
}

/// Verifies Knative OIDC delivery tokens.
pub struct OidcVerifier {
    config: OidcConfig,
    client: reqwest::Client,
    cache: RwLock<Cache>,
    // Single flight: one fetch at a time, and verifications never wait on the network while
    // holding the cache lock.
    fetching: tokio::sync::Mutex<()>,
}

/// A refresh for an unknown `kid` happens at most this often, so tokens with made-up key ids
/// cannot make the service hammer the issuer (the first load does not count). Also the shortest
/// time a fetched JWKS is kept (an issuer answering `no-cache` is asked once a second at most).
const REFRESH_MIN_INTERVAL: Duration = Duration::from_secs(1);

/// Why a JSON document could not be fetched from the issuer. The message never holds the URL.
#[derive(Debug, thiserror::Error)]
enum GetError {
    /// No answer: connection, TLS, timeout, too many redirects.
    #[error("{0}")]
    Request(#[source] reqwest::Error),
    /// An answer that is not a success, and for a `401` or `403` what the token file held.
    #[error("HTTP {0}{1}")]
    Status(u16, String),
    /// The answer's body cannot be read as JSON.
    #[error("{0}")]
    Body(#[source] reqwest::Error),
}

impl GetError {
    /// A stable, bounded label.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the label a count of these failures would use; tested"
        )
    )]
    fn kind(&self) -> &'static str {
        match self {
            GetError::Request(_) => "request",
            GetError::Status(..) => "status",
            GetError::Body(_) => "body",
        }
    }
}

/// Why the issuer's signing keys cannot be fetched now: logged, and the caller gets a `503`.
#[derive(Debug, thiserror::Error)]
enum JwksError {
    /// The issuer's discovery document cannot be fetched.
    #[error("OIDC discovery failed: {0}")]
    Discovery(#[source] GetError),
    /// The discovery document names no JWKS.
    #[error("OIDC discovery document has no jwks_uri")]
    NoJwksUri,
    /// The JWKS cannot be fetched.
    #[error("JWKS fetch failed: {0}")]
    Fetch(#[source] GetError),
    /// The JWKS is not a JWK set.
    #[error("JWKS is not valid: {0}")]
    Invalid(#[source] serde_json::Error),
    /// The keys expired again before they could be used (a concurrent fetch failed).
    #[error("the JWKS expired")]
    Expired,
}

impl JwksError {
    /// A stable, bounded label (the `kind` of the log line that reports it).
    fn kind(&self) -> &'static str {
        match self {
            JwksError::Discovery(_) => "discovery",
            JwksError::NoJwksUri => "no_jwks_uri",
            JwksError::Fetch(_) => "jwks_fetch",
            JwksError::Invalid(_) => "invalid_jwks",
            JwksError::Expired => "expired",
        }
    }
}

/// Why a published key verifies no token: the token is refused (`401`) with this reason.
#[derive(Debug, thiserror::Error)]
enum KeyError {
    /// The key is published for encryption.
    #[error("the key is published for encryption, not signatures")]
    Encryption,
    /// The key's published `alg` is no signature algorithm (`RSA-OAEP`, ...).
    #[error("the key's algorithm {algorithm} is not a signature algorithm")]
    NotSignature {
        /// The published `alg`.
        algorithm: KeyAlgorithm,
        /// Why it is not one.
        #[source]
        source: jsonwebtoken::errors::Error,
    },
    /// An elliptic curve key of a curve other than P-256 and P-384, without an `alg`.
    #[error("the key's curve is not supported")]
    Curve,
    /// A key type without an implied algorithm, without an `alg`.
    #[error("the key's type is not supported")]
    KeyType,
    /// A signature algorithm that is not asymmetric ([`ACCEPTED`]).
    #[error("the key's algorithm {0:?} is not accepted")]
    NotAccepted(Algorithm),
    /// The key's parameters do not make a key.
    #[error("{0}")]
    Decoding(#[source] jsonwebtoken::errors::Error),
}

impl KeyError {
    /// A stable, bounded label.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the label a count of these failures would use; tested"
        )
    )]
    fn kind(&self) -> &'static str {
        match self {
            KeyError::Encryption => "encryption_key",
            KeyError::NotSignature { .. } => "not_signature",
            KeyError::Curve => "unsupported_curve",
            KeyError::KeyType => "unsupported_key_type",
            KeyError::NotAccepted(_) => "not_accepted",
            KeyError::Decoding(_) => "invalid_key",
        }
    }
}

/// The `max-age` of a `Cache-Control` header (`no-cache` and `no-store` count as zero).
fn max_age(cache_control: &str) -> Option<Duration> {
    cache_control.split(',').find_map(|directive| {
        let directive = directive.trim().to_ascii_lowercase();
        if directive == "no-cache" || directive == "no-store" {
            return Some(Duration::ZERO);
        }
        directive
            .strip_prefix("max-age=")
            .and_then(|seconds| seconds.trim_matches('"').parse::<u64>().ok())
            .map(Duration::from_secs)
    })
}

/// The one algorithm a JWK verifies: its `alg` when published, else the one its key type implies
/// (see the module documentation); only asymmetric signature algorithms.
fn key_algorithm(jwk: &Jwk) -> Result<Algorithm, KeyError> {
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return Err(KeyError::Encryption);
    }
    let algorithm = match (&jwk.common.key_algorithm, &jwk.algorithm) {
        (Some(published), _) => published
            .to_string()
            .parse::<Algorithm>()
            .map_err(|source| KeyError::NotSignature {
                algorithm: *published,
                source,
            })?,
        (None, AlgorithmParameters::RSA(_)) => Algorithm::RS256,
        (None, AlgorithmParameters::EllipticCurve(parameters)) => match parameters.curve {
            EllipticCurve::P256 => Algorithm::ES256,
            EllipticCurve::P384 => Algorithm::ES384,
            _ => return Err(KeyError::Curve),
        },
        (None, AlgorithmParameters::OctetKeyPair(parameters))
            if parameters.curve == EllipticCurve::Ed25519 =>
        {
            Algorithm::EdDSA
        }
        (None, _) => return Err(KeyError::KeyType),
    };
    if ACCEPTED.contains(&algorithm) {
        Ok(algorithm)
    } else {
        Err(KeyError::NotAccepted(algorithm))
    }
}

/// The asymmetric algorithms a token may use.
const ACCEPTED: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

impl OidcVerifier {
    /// A verifier; fails when the CA file cannot be read.
    pub fn new(config: OidcConfig) -> Result<OidcVerifier, SetupError> {
        let mut builder = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::limited(3));
        if let Some(path) = &config.ca_file {
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
        let client = builder.build().map_err(SetupError::Client)?;
        Ok(OidcVerifier {
            config,
            client,
            cache: RwLock::new(Cache::default()),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// A JSON document and the `max-age` its `Cache-Control` header allows, if any.
    async fn get_json(&self, url: &str) -> Result<(serde_json::Value, Option<Duration>), GetError> {
        let mut request = self.client.get(url);
        // What the token file held, for the error of an issuer that refuses the request.
        let mut sent = "no token: auth.oidc.tokenFile is not set".to_string();
        if let Some(path) = &self.config.token_file {
            // Re-read on every fetch: the kubelet rotates projected tokens. An unreadable or
            // empty file sends no `Authorization` (never `Bearer ` with nothing after it): the
            // issuer's answer (`401`) then says what is missing.
            sent = match std::fs::read_to_string(path) {
                Ok(token) if !token.trim().is_empty() => {
                    request = request.bearer_auth(token.trim());
                    format!(
                        "the token of auth.oidc.tokenFile {} was sent",
                        path.display()
                    )
                }
                Ok(_) => format!("no token: auth.oidc.tokenFile {} is empty", path.display()),
                Err(error) => format!(
                    "no token: auth.oidc.tokenFile {} cannot be read: {error}",
                    path.display()
                ),
            };
        }
        let response = request
            .send()
            .await
            .map_err(|error| GetError::Request(error.without_url()))?;
        if !response.status().is_success() {
            let status = response.status().as_u16();
            let why = if matches!(status, 401 | 403) {
                format!(" ({sent})")
            } else {
                String::new()
            };
            return Err(GetError::Status(status, why));
        }
        let cache = response
            .headers()
            .get(reqwest::header::CACHE_CONTROL)
            .and_then(|value| value.to_str().ok())
            .and_then(max_age);
        let document = response
            .json()
            .await
            .map_err(|error| GetError::Body(error.without_url()))?;
        Ok((document, cache))
    }

    /// Fetches the JWKS when `why` still holds once this task's turn comes (single flight): the
    /// cache expired, or (at most once a second) a token names an unknown `kid`. A failed fetch
    /// is not retried for a second (the caller answers 503, the Broker retries).
    async fn refresh(&self, why: Refresh) -> Result<(), Arc<JwksError>> {
        let _single = self.fetching.lock().await;
        let jwks_url = {
            let mut cache = self.cache.write().await;
            let recently =
                |at: Option<Instant>| at.is_some_and(|at| at.elapsed() < REFRESH_MIN_INTERVAL);
            match why {
                // Another task fetched while this one waited.
                Refresh::Expired if cache.fresh() => return Ok(()),
                Refresh::UnknownKid if !cache.fresh() => {}
                Refresh::UnknownKid if recently(cache.last_unknown_kid_refresh) => return Ok(()),
                Refresh::UnknownKid => cache.last_unknown_kid_refresh = Some(Instant::now()),
                Refresh::Expired => {}
            }
            if let (Some(error), true) = (&cache.last_error, recently(cache.last_attempt)) {
                return Err(Arc::clone(error));
            }
            self.config
                .jwks_url
                .clone()
                .or_else(|| cache.jwks_url.clone())
        };
        let fetched = self.fetch(jwks_url).await;
        let mut cache = self.cache.write().await;
        let now = Instant::now();
        cache.last_attempt = Some(now);
        match fetched {
            Ok((url, keys, max_age)) => {
                let keep = max_age
                    .unwrap_or(self.config.jwks_max_age)
                    .min(self.config.jwks_max_age)
                    .max(REFRESH_MIN_INTERVAL);
                cache.jwks_url = Some(url);
                cache.keys = Some(keys);
                cache.expires = Some(now + keep);
                cache.last_error = None;
                Ok(())
            }
            Err(error) => {
                let error = Arc::new(error);
                cache.last_error = Some(Arc::clone(&error));
                Err(error)
            }
        }
    }

    async fn fetch(
        &self,
        known_url: Option<String>,
    ) -> Result<(String, JwkSet, Option<Duration>), JwksError> {
        let jwks_url = match known_url {
            Some(url) => url,
            None => {
                let discovery_url = format!(
                    "{}/.well-known/openid-configuration",
                    self.config.issuer.trim_end_matches('/')
                );
                let (discovery, _) = self
                    .get_json(&discovery_url)
                    .await
                    .map_err(JwksError::Discovery)?;
                discovery
                    .get("jwks_uri")
                    .and_then(|value| value.as_str())
                    .ok_or(JwksError::NoJwksUri)?
                    .to_string()
            }
        };
        let (document, max_age) = self.get_json(&jwks_url).await.map_err(JwksError::Fetch)?;
        let keys: JwkSet = serde_json::from_value(document).map_err(JwksError::Invalid)?;
        Ok((jwks_url, keys, max_age))
    }

    /// The key for `kid` and the one algorithm it verifies; `Ok(None)` when the issuer does not
    /// publish `kid` (now), `Err` when the keys cannot be fetched.
    async fn key(
        &self,
        kid: &str,
    ) -> Result<Option<Result<(DecodingKey, Algorithm), KeyError>>, Arc<JwksError>> {
        let find = |cache: &Cache| -> Option<Result<(DecodingKey, Algorithm), KeyError>> {
            let jwk = cache.keys.as_ref()?.find(kid)?;
            Some(key_algorithm(jwk).and_then(|algorithm| {
                DecodingKey::from_jwk(jwk)
                    .map(|key| (key, algorithm))
                    .map_err(KeyError::Decoding)
            }))
        };
        {
            let cache = self.cache.read().await;
            if cache.fresh() {
                if let Some(found) = find(&cache) {
                    return Ok(Some(found));
                }
            }
        }
        let why = if self.cache.read().await.fresh() {
            Refresh::UnknownKid
        } else {
            Refresh::Expired
        };
        self.refresh(why).await?;
        let cache = self.cache.read().await;
        if !cache.fresh() {
            // Only a concurrent fetch failing right after ours could leave it so.
            return Err(cache
                .last_error
                .clone()
                .unwrap_or_else(|| Arc::new(JwksError::Expired)));
        }
        Ok(find(&cache))
    }

    /// Verifies a token.
    pub async fn verify(&self, token: &str) -> Result<(), AuthError> {
        let unauthenticated =
            |reason: String| AuthError::Unauthenticated(format!("invalid token: {reason}"));
        let header = jsonwebtoken::decode_header(token)
            .map_err(|error| unauthenticated(error.to_string()))?;
        if !ACCEPTED.contains(&header.alg) {
            return Err(unauthenticated(format!(
                "algorithm {:?} is not accepted",
                header.alg
            )));
        }
        let kid = header
            .kid
            .ok_or_else(|| unauthenticated("no kid in the token header".to_string()))?;
        let (key, key_algorithm) = match self.key(&kid).await {
            Ok(Some(Ok(found))) => found,
            Ok(Some(Err(reason))) => {
                return Err(unauthenticated(format!("signing key {kid:?}: {reason}")))
            }
            Ok(None) => return Err(unauthenticated(format!("unknown signing key {kid:?}"))),
            Err(error) => {
                tracing::warn!(message = "Could not fetch the OIDC signing keys.", kind = error.kind(), %error);
                return Err(AuthError::Unavailable(
                    "the issuer's signing keys cannot be fetched now; retry later".to_string(),
                ));
            }
        };
        if header.alg != key_algorithm {
            return Err(unauthenticated(format!(
                "algorithm {:?} does not match the key's {key_algorithm:?}",
                header.alg
            )));
        }
        let mut validation = Validation::new(key_algorithm);
        validation.set_issuer(&[self.config.issuer.as_str()]);
        validation.set_audience(&[self.config.audience.as_str()]);
        validation.leeway = self.config.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|error| unauthenticated(error.to_string()))?;
        if !self.config.allowed_subjects.is_empty() {
            let allowed: HashSet<&str> = self
                .config
                .allowed_subjects
                .iter()
                .map(String::as_str)
                .collect();
            let subject = data.claims.sub.unwrap_or_default();
            if !allowed.contains(subject.as_str()) {
                return Err(AuthError::Forbidden(format!(
                    "subject {subject:?} is not allowed"
                )));
            }
        }
        Ok(())
    }
}

/// Constant-time comparison, so a token cannot be guessed byte by byte from timings.
pub(crate) fn same_secret(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    let mut difference = a.len() ^ b.len();
    for index in 0..a.len().max(b.len()) {
        difference |=
            usize::from(a.get(index).copied().unwrap_or(0) ^ b.get(index).copied().unwrap_or(0));
    }
    difference == 0
}

/// The bearer token of a request, if any.
pub fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    bearer_credentials(
        headers
            .get(axum::http::header::AUTHORIZATION)?
            .to_str()
            .ok()?,
    )
}

/// The token of an `Authorization` value of the `Bearer` scheme: `credentials = auth-scheme
/// [ 1*SP token68 ]`, and the scheme is case-insensitive (RFC 9110 §11.1, §11.4; RFC 6750 §2.1),
/// so `bearer x` and `BEARER x` are `Bearer x`.
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_matches(' '))
}

#[cfg(test)]
mod tests;
