//! Authenticated ingest: Knative OIDC tokens minted locally, verified against a JWKS served on
//! loopback (discovery, caching, refresh on an unknown `kid`), and the static bearer mode.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use drift_core::config::{OidcConfig, Secret};
use drift_sentinel::ingest::auth::{IngestAuth, OidcVerifier};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::support::{app_with_auth, fixture_path, revision, structured_event};

struct Issuer {
    base: String,
    fetches: Arc<AtomicUsize>,
    rotated: Arc<AtomicBool>,
    /// When set, the JWKS served instead of the fixture files.
    published: Arc<Mutex<Option<Value>>>,
    /// When set, the `Cache-Control` header of the JWKS answer.
    cache_control: Arc<Mutex<Option<String>>>,
}

impl Issuer {
    /// Publishes `keys` (fixture key ids) from now on.
    fn publish(&self, kids: &[&str]) {
        let all: Value =
            serde_json::from_str(&std::fs::read_to_string(oidc_file("jwks-rotated.json")).unwrap())
                .unwrap();
        let keys: Vec<Value> = all["keys"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|key| kids.contains(&key["kid"].as_str().unwrap()))
            .cloned()
            .collect();
        *self.published.lock().unwrap() = Some(json!({ "keys": keys }));
    }
}

fn oidc_file(name: &str) -> std::path::PathBuf {
    fixture_path("../oidc").join(name)
}

async fn issuer() -> Issuer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let fetches = Arc::new(AtomicUsize::new(0));
    let rotated = Arc::new(AtomicBool::new(false));
    let published: Arc<Mutex<Option<Value>>> = Arc::new(Mutex::new(None));
    let cache_control: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let (discovery_base, counter, switch) =
        (base.clone(), Arc::clone(&fetches), Arc::clone(&rotated));
    let (served, header) = (Arc::clone(&published), Arc::clone(&cache_control));
    let router = Router::new()
        .route(
            "/.well-known/openid-configuration",
            get(move |headers: axum::http::HeaderMap| {
                let base = discovery_base.clone();
                async move {
                    // The API server requires an authenticated request for discovery.
                    if headers.get("authorization").and_then(|v| v.to_str().ok())
                        != Some("Bearer sa-token")
                    {
                        return (StatusCode::UNAUTHORIZED, Json(json!({})));
                    }
                    (
                        StatusCode::OK,
                        Json(json!({"issuer": base, "jwks_uri": format!("{base}/openid/v1/jwks")})),
                    )
                }
            }),
        )
        .route(
            "/openid/v1/jwks",
            get(move || {
                let (counter, switch) = (Arc::clone(&counter), Arc::clone(&switch));
                let (served, header) = (Arc::clone(&served), Arc::clone(&header));
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    let file = if switch.load(Ordering::SeqCst) {
                        "jwks-rotated.json"
                    } else {
                        "jwks-initial.json"
                    };
                    let jwks: Value = served.lock().unwrap().clone().unwrap_or_else(|| {
                        serde_json::from_str(&std::fs::read_to_string(oidc_file(file)).unwrap())
                            .unwrap()
                    });
                    if jwks == json!("gone") {
                        return StatusCode::SERVICE_UNAVAILABLE.into_response();
                    }
                    let mut response = Json(jwks).into_response();
                    if let Some(value) = header.lock().unwrap().clone() {
                        response.headers_mut().insert(
                            "cache-control",
                            axum::http::HeaderValue::from_str(&value).unwrap(),
                        );
                    }
                    response
                }
            }),
        );
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Issuer {
        base,
        fetches,
        rotated,
        published,
        cache_control,
    }
}

const AUDIENCE: &str = "drift-sentinel";
const SUBJECT: &str =
    "system:serviceaccount:drift-sentinel:drift-sentinel-oidc-eventing.knative.dev-trigger";

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn token(
    issuer: &str,
    key_file: &str,
    kid: &str,
    alg: Algorithm,
    edit: impl FnOnce(&mut Value),
) -> String {
    let mut claims = json!({"iss": issuer, "aud": [AUDIENCE], "sub": SUBJECT, "iat": now(), "nbf": now() - 5, "exp": now() + 3600,
                            "kubernetes.io": {"namespace": "drift-sentinel"}});
    edit(&mut claims);
    let pem = std::fs::read(oidc_file(key_file)).unwrap();
    let key = match alg {
        Algorithm::ES256 => EncodingKey::from_ec_pem(&pem).unwrap(),
        _ => EncodingKey::from_rsa_pem(&pem).unwrap(),
    };
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_string());
    encode(&header, &claims, &key).unwrap()
}

fn verifier(issuer: &Issuer, subjects: &[&str]) -> IngestAuth {
    verifier_keeping_keys(issuer, subjects, drift_core::config::DEFAULT_JWKS_MAX_AGE)
}

/// A verifier that keeps the JWKS at most `jwks_max_age` (`auth.oidc.jwksMaxAge`).
fn verifier_keeping_keys(
    issuer: &Issuer,
    subjects: &[&str],
    jwks_max_age: std::time::Duration,
) -> IngestAuth {
    // Written once per process: the verifier reads this file on every discovery, and a rewrite
    // (truncate, then write) racing another test's read gave it an empty token, so a `401` and a
    // `503` (seen once in CI with eight test threads).
    static TOKEN_FILE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let token_file = TOKEN_FILE
        .get_or_init(|| {
            let path = std::env::temp_dir().join(format!("sa-token-{}", std::process::id()));
            std::fs::write(&path, "sa-token\n").unwrap();
            path
        })
        .clone();
    IngestAuth::Oidc(Arc::new(
        OidcVerifier::new(OidcConfig {
            issuer: issuer.base.clone(),
            audience: AUDIENCE.into(),
            jwks_url: None,
            allowed_subjects: subjects.iter().map(|s| s.to_string()).collect(),
            ca_file: None,
            token_file: Some(token_file),
            leeway: std::time::Duration::from_secs(30),
            jwks_max_age,
        })
        .unwrap(),
    ))
}

async fn post(router: &Router, bearer: Option<&str>) -> (StatusCode, Value) {
    let mut request = Request::post("/").header("content-type", "application/cloudevents+json");
    if let Some(token) = bearer {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let body = serde_json::to_vec(&structured_event(&uuid_like(), "update", &revision())).unwrap();
    let response = router
        .clone()
        .oneshot(request.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = crate::support::body_bytes(response).await;
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn uuid_like() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("oidc-{}", NEXT.fetch_add(1, Ordering::SeqCst))
}

#[tokio::test]
async fn oidc_tokens_are_verified_like_knative_does() {
    let issuer = issuer().await;
    let app = app_with_auth(verifier(&issuer, &[]));
    let router = &app.router;
    let good = token(
        &issuer.base,
        "rsa-key-1.pem",
        "rsa-1",
        Algorithm::RS256,
        |_| {},
    );
    assert_eq!(post(router, Some(&good)).await.0, StatusCode::ACCEPTED);
    let (status, body) = post(router, None).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unauthorized"))
    );
    // What the dead-letter sink shows names the usual cause behind a Broker.
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|message| message.contains("authentication-oidc")),
        "{body}"
    );
    let cases: Vec<(&str, String)> = vec![
        (
            "wrong audience",
            token(
                &issuer.base,
                "rsa-key-1.pem",
                "rsa-1",
                Algorithm::RS256,
                |c| c["aud"] = json!(["other"]),
            ),
        ),
        (
            "wrong issuer",
            token(
                &issuer.base,
                "rsa-key-1.pem",
                "rsa-1",
                Algorithm::RS256,
                |c| c["iss"] = json!("https://evil.example"),
            ),
        ),
        (
            "expired",
            token(
                &issuer.base,
                "rsa-key-1.pem",
                "rsa-1",
                Algorithm::RS256,
                |c| c["exp"] = json!(now() - 120),
            ),
        ),
        (
            "not yet valid",
            token(
                &issuer.base,
                "rsa-key-1.pem",
                "rsa-1",
                Algorithm::RS256,
                |c| c["nbf"] = json!(now() + 600),
            ),
        ),
        (
            "signed by another key",
            token(
                &issuer.base,
                "rsa-key-2.pem",
                "rsa-1",
                Algorithm::RS256,
                |_| {},
            ),
        ),
        ("garbage", "not.a.jwt".to_string()),
    ];
    for (what, bad) in cases {
        let (status, body) = post(router, Some(&bad)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {body}");
    }
    // An HMAC token keyed with the public JWKS material must never pass.
    let jwks: Value =
        serde_json::from_str(&std::fs::read_to_string(oidc_file("jwks-initial.json")).unwrap())
            .unwrap();
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("rsa-1".into());
    let forged = encode(
        &header,
        &json!({"iss": issuer.base, "aud": [AUDIENCE], "exp": now() + 60}),
        &EncodingKey::from_secret(jwks["keys"][0]["n"].as_str().unwrap().as_bytes()).unwrap(),
    )
    .unwrap();
    assert_eq!(
        post(router, Some(&forged)).await.0,
        StatusCode::UNAUTHORIZED
    );
    // Within the leeway an expired token still passes (clock skew).
    let skewed = token(
        &issuer.base,
        "rsa-key-1.pem",
        "rsa-1",
        Algorithm::RS256,
        |c| c["exp"] = json!(now() - 10),
    );
    assert_eq!(post(router, Some(&skewed)).await.0, StatusCode::ACCEPTED);
    // ES256 keys work as well.
    let ec = token(
        &issuer.base,
        "ec-key-1.pem",
        "ec-1",
        Algorithm::ES256,
        |_| {},
    );
    assert_eq!(post(router, Some(&ec)).await.0, StatusCode::ACCEPTED);
    assert_eq!(
        issuer.fetches.load(Ordering::SeqCst),
        1,
        "the JWKS is cached"
    );
}

#[tokio::test]
async fn unknown_kid_refreshes_the_jwks_once() {
    let issuer = issuer().await;
    let app = app_with_auth(verifier(&issuer, &[]));
    let first = token(
        &issuer.base,
        "rsa-key-1.pem",
        "rsa-1",
        Algorithm::RS256,
        |_| {},
    );
    assert_eq!(
        post(&app.router, Some(&first)).await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);
    // The cluster rotates its signing key.
    issuer.rotated.store(true, Ordering::SeqCst);
    let rotated = token(
        &issuer.base,
        "rsa-key-2.pem",
        "rsa-2",
        Algorithm::RS256,
        |_| {},
    );
    assert_eq!(
        post(&app.router, Some(&rotated)).await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        issuer.fetches.load(Ordering::SeqCst),
        2,
        "one refresh for the new kid"
    );
    // A kid nobody publishes is refused without hammering the issuer.
    let bogus = token(
        &issuer.base,
        "rsa-key-2.pem",
        "nope",
        Algorithm::RS256,
        |_| {},
    );
    for _ in 0..5 {
        assert_eq!(
            post(&app.router, Some(&bogus)).await.0,
            StatusCode::UNAUTHORIZED
        );
    }
    assert!(issuer.fetches.load(Ordering::SeqCst) <= 3);
}

#[tokio::test]
async fn subject_allow_list_answers_403() {
    let issuer = issuer().await;
    let app = app_with_auth(verifier(&issuer, &[SUBJECT]));
    let allowed = token(
        &issuer.base,
        "rsa-key-1.pem",
        "rsa-1",
        Algorithm::RS256,
        |_| {},
    );
    assert_eq!(
        post(&app.router, Some(&allowed)).await.0,
        StatusCode::ACCEPTED
    );
    let other = token(
        &issuer.base,
        "rsa-key-1.pem",
        "rsa-1",
        Algorithm::RS256,
        |c| c["sub"] = json!("system:serviceaccount:default:intruder"),
    );
    let (status, body) = post(&app.router, Some(&other)).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("forbidden"))
    );
}

#[tokio::test]
async fn static_bearer_token_mode() {
    let app = app_with_auth(IngestAuth::Static(Secret::new("ingest-s3cret")));
    assert_eq!(
        post(&app.router, Some("ingest-s3cret")).await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        post(&app.router, Some("ingest-s3cre")).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(post(&app.router, None).await.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn unreachable_issuer_is_503_so_the_broker_retries() {
    // Nothing listens on this port: discovery fails.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let down = Issuer {
        base: closed,
        fetches: Arc::new(AtomicUsize::new(0)),
        rotated: Arc::new(AtomicBool::new(false)),
        published: Arc::new(Mutex::new(None)),
        cache_control: Arc::new(Mutex::new(None)),
    };
    let app = app_with_auth(verifier(&down, &[]));
    let token = token(
        &down.base,
        "rsa-key-1.pem",
        "rsa-1",
        Algorithm::RS256,
        |_| {},
    );
    let mut request = Request::post("/").header("content-type", "application/cloudevents+json");
    request = request.header("authorization", format!("Bearer {token}"));
    let body = serde_json::to_vec(&structured_event("down-1", "update", &revision())).unwrap();
    let response = app
        .router
        .clone()
        .oneshot(request.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().get("retry-after").is_some());
}

/// Issue 15, item 11: a key the issuer no longer publishes stops being trusted once the cached
/// JWKS expires (here by the issuer's `Cache-Control: max-age`).
#[tokio::test]
async fn a_key_removed_from_the_jwks_stops_being_trusted_when_the_cache_expires() {
    let issuer = issuer().await;
    *issuer.cache_control.lock().unwrap() = Some("public, max-age=1".to_string());
    issuer.publish(&["rsa-1", "rsa-2"]);
    let app = app_with_auth(verifier(&issuer, &[]));
    let old_key = token(
        &issuer.base,
        "rsa-key-1.pem",
        "rsa-1",
        Algorithm::RS256,
        |_| {},
    );
    assert_eq!(
        post(&app.router, Some(&old_key)).await.0,
        StatusCode::ACCEPTED
    );
    // The cluster retires rsa-1 (e.g. it leaked).
    issuer.publish(&["rsa-2"]);
    // Within max-age the cached JWKS still answers; wait until it has certainly expired.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let (status, body) = post(&app.router, Some(&old_key)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let new_key = token(
        &issuer.base,
        "rsa-key-2.pem",
        "rsa-2",
        Algorithm::RS256,
        |_| {},
    );
    assert_eq!(
        post(&app.router, Some(&new_key)).await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        issuer.fetches.load(Ordering::SeqCst),
        2,
        "one fetch at start, one when the cache expired"
    );
}

/// Issue 15, item 11: `auth.oidc.jwksMaxAge` caps how long keys are kept, also when the issuer
/// allows longer (the Kubernetes API server sends `max-age=3600`).
#[tokio::test]
async fn the_configured_maximum_age_caps_the_issuers_max_age() {
    let issuer = issuer().await;
    *issuer.cache_control.lock().unwrap() = Some("public, max-age=3600".to_string());
    issuer.publish(&["rsa-1", "rsa-2"]);
    let app = app_with_auth(verifier_keeping_keys(
        &issuer,
        &[],
        std::time::Duration::from_secs(1),
    ));
    let old_key = token(
        &issuer.base,
        "rsa-key-1.pem",
        "rsa-1",
        Algorithm::RS256,
        |_| {},
    );
    assert_eq!(
        post(&app.router, Some(&old_key)).await.0,
        StatusCode::ACCEPTED
    );
    issuer.publish(&["rsa-2"]);
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert_eq!(
        post(&app.router, Some(&old_key)).await.0,
        StatusCode::UNAUTHORIZED
    );
    // Keys that are still published keep working across the refetch, and a config below a
    // second is refused.
    let error = drift_core::config::load_str(
        "auth: {oidc: {issuer: 'https://kubernetes.default.svc', audience: a, jwksMaxAge: 0s}}",
        &|_| None,
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("auth.oidc.jwksMaxAge"), "{error}");
}

/// Issue 15, item 11: when the cached keys have expired and the issuer cannot be reached, a
/// token is not verified with keys that may have been withdrawn: `503`, and the Broker retries.
#[tokio::test]
async fn expired_keys_are_not_used_when_the_issuer_is_unreachable() {
    let issuer = issuer().await;
    *issuer.cache_control.lock().unwrap() = Some("max-age=1".to_string());
    let app = app_with_auth(verifier(&issuer, &[]));
    let good = token(
        &issuer.base,
        "rsa-key-1.pem",
        "rsa-1",
        Algorithm::RS256,
        |_| {},
    );
    assert_eq!(post(&app.router, Some(&good)).await.0, StatusCode::ACCEPTED);
    // The issuer's JWKS endpoint now fails.
    *issuer.published.lock().unwrap() = Some(json!("gone"));
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert_eq!(
        post(&app.router, Some(&good)).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
}

/// Issue 15, item 11: the token's `alg` must be the JWK's: an RSA key published for RS256 does
/// not verify a PS256 token (nor RS512), though the signature is made with the right key.
#[tokio::test]
async fn the_token_alg_must_match_the_jwk_alg() {
    let issuer = issuer().await;
    let app = app_with_auth(verifier(&issuer, &[]));
    for alg in [Algorithm::PS256, Algorithm::RS512, Algorithm::PS512] {
        let forged = token(&issuer.base, "rsa-key-1.pem", "rsa-1", alg, |_| {});
        let (status, body) = post(&app.router, Some(&forged)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{alg:?}: {body}");
    }
    let good = token(
        &issuer.base,
        "rsa-key-1.pem",
        "rsa-1",
        Algorithm::RS256,
        |_| {},
    );
    assert_eq!(post(&app.router, Some(&good)).await.0, StatusCode::ACCEPTED);
}
