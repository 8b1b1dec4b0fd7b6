//! Unit tests of `auth`.

use serde_json::json;

use super::*;

fn jwk(value: serde_json::Value) -> Jwk {
    serde_json::from_value(value).unwrap()
}

#[test]
fn keys_that_verify_nothing_say_why_with_a_stable_kind() {
    let (n, e) = (
        "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1Wl",
        "AQAB",
    );
    let cases = [
        (
            json!({"kty": "RSA", "use": "enc", "n": n, "e": e}),
            "encryption_key",
            "the key is published for encryption, not signatures".to_string(),
        ),
        (
            json!({"kty": "RSA", "alg": "RSA-OAEP", "n": n, "e": e}),
            "not_signature",
            format!(
                "the key's algorithm {} is not a signature algorithm",
                KeyAlgorithm::RSA_OAEP
            ),
        ),
        (
            json!({"kty": "EC", "crv": "P-521", "x": "AA", "y": "AA"}),
            "unsupported_curve",
            "the key's curve is not supported".to_string(),
        ),
        (
            json!({"kty": "oct", "k": "c2VjcmV0"}),
            "unsupported_key_type",
            "the key's type is not supported".to_string(),
        ),
        (
            json!({"kty": "oct", "alg": "HS256", "k": "c2VjcmV0"}),
            "not_accepted",
            "the key's algorithm HS256 is not accepted".to_string(),
        ),
    ];
    for (key, kind, message) in cases {
        let error = key_algorithm(&jwk(key.clone())).unwrap_err();
        assert_eq!((error.kind(), error.to_string()), (kind, message), "{key}");
    }
    assert_eq!(
        key_algorithm(&jwk(json!({"kty": "RSA", "n": n, "e": e}))).unwrap(),
        Algorithm::RS256
    );
    let invalid = DecodingKey::from_jwk(&jwk(json!({"kty": "oct", "k": ""}))).unwrap_err();
    let message = invalid.to_string();
    let error = KeyError::Decoding(invalid);
    assert_eq!((error.kind(), error.to_string()), ("invalid_key", message));
}

#[test]
fn jwks_fetch_errors_keep_their_messages_and_have_stable_kinds() {
    // A reqwest error without a network: a request that cannot be built.
    let reqwest_error = || reqwest::Client::new().get("not a url").build().unwrap_err();
    let shown = reqwest_error().to_string();
    for (error, kind) in [
        (GetError::Request(reqwest_error()), "request"),
        (GetError::Body(reqwest_error()), "body"),
    ] {
        assert_eq!((error.kind(), error.to_string()), (kind, shown.clone()));
    }
    let status = GetError::Status(404, String::new());
    assert_eq!(
        (status.kind(), status.to_string().as_str()),
        ("status", "HTTP 404")
    );
    let invalid = serde_json::from_value::<JwkSet>(json!({"keys": 1})).unwrap_err();
    let invalid_message = format!("JWKS is not valid: {invalid}");
    let cases = [
        (
            JwksError::Discovery(GetError::Status(500, String::new())),
            "discovery",
            "OIDC discovery failed: HTTP 500".to_string(),
        ),
        (
            JwksError::NoJwksUri,
            "no_jwks_uri",
            "OIDC discovery document has no jwks_uri".to_string(),
        ),
        (
            JwksError::Fetch(GetError::Status(503, String::new())),
            "jwks_fetch",
            "JWKS fetch failed: HTTP 503".to_string(),
        ),
        (JwksError::Invalid(invalid), "invalid_jwks", invalid_message),
        (
            JwksError::Expired,
            "expired",
            "the JWKS expired".to_string(),
        ),
    ];
    for (error, kind, message) in cases {
        assert_eq!((error.kind(), error.to_string()), (kind, message));
    }
}

#[test]
fn a_verifier_that_cannot_be_built_says_so_once_in_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let config = |ca_file: PathBuf| OidcConfig {
        issuer: "https://kubernetes.default.svc".to_string(),
        audience: "drift-sentinel".to_string(),
        jwks_url: None,
        allowed_subjects: Vec::new(),
        ca_file: Some(ca_file),
        token_file: None,
        leeway: Duration::from_secs(30),
        jwks_max_age: Duration::from_secs(60),
    };
    let missing = dir.path().join("missing.crt");
    let Err(error) = OidcVerifier::new(config(missing.clone())) else {
        panic!("a missing CA file builds a verifier");
    };
    assert_eq!(error.kind(), "read_ca_file");
    let io = std::fs::read(&missing).unwrap_err();
    let message = format!("auth.oidc.caFile {}: {io}", missing.display());
    assert_eq!(error.to_string(), message);
    // The start prints the chain (`{:#}`): the cause is not repeated.
    assert_eq!(format!("{:#}", anyhow::Error::new(error)), message);
    let broken = dir.path().join("broken.crt");
    std::fs::write(
        &broken,
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    // reqwest reads the PEM, and rustls refuses the certificate when the client is built.
    let Err(error) = OidcVerifier::new(config(broken)) else {
        panic!("a certificate that is not one builds a verifier");
    };
    assert_eq!(error.kind(), "http_client");
    assert_eq!(error.to_string(), "builder error");
    assert_eq!(format!("{:#}", anyhow::Error::new(error)), "builder error");
}

/// The issuer's documents are fetched with the projected token read from its file at every
/// fetch; an empty file (a hand-made one being rewritten) sends no `Authorization` header,
/// never `Bearer ` with nothing after it.
#[tokio::test]
async fn discovery_sends_the_token_files_token_and_no_header_for_an_empty_file() {
    let seen: Arc<std::sync::Mutex<Vec<Option<String>>>> = Arc::default();
    let recorded = Arc::clone(&seen);
    let router = axum::Router::new().route(
        "/doc",
        axum::routing::get(move |headers: axum::http::HeaderMap| {
            let recorded = Arc::clone(&recorded);
            async move {
                recorded.lock().unwrap().push(
                    headers
                        .get("authorization")
                        .map(|value| value.to_str().unwrap().to_string()),
                );
                axum::Json(json!({"ok": true}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    let verifier = OidcVerifier::new(OidcConfig {
        issuer: base.clone(),
        audience: "drift-sentinel".to_string(),
        jwks_url: None,
        allowed_subjects: Vec::new(),
        ca_file: None,
        token_file: Some(token_file.clone()),
        leeway: Duration::from_secs(30),
        jwks_max_age: Duration::from_secs(60),
    })
    .unwrap();
    let url = format!("{base}/doc");
    for contents in ["sa-token\n", "", " \n", "rotated"] {
        std::fs::write(&token_file, contents).unwrap();
        let (document, _) = verifier.get_json(&url).await.unwrap();
        assert_eq!(document, json!({"ok": true}));
    }
    std::fs::remove_file(&token_file).unwrap();
    verifier.get_json(&url).await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [
            Some("Bearer sa-token".to_string()),
            None,
            None,
            Some("Bearer rotated".to_string()),
            None,
        ]
    );
}

/// An issuer that refuses discovery (`401`): the error says what the token file held, so the
/// log names `auth.oidc.tokenFile` when it is empty, unreadable or not set.
#[tokio::test]
async fn a_refused_discovery_says_what_the_token_file_held() {
    let router = axum::Router::new()
        .route(
            "/doc",
            axum::routing::get(|headers: axum::http::HeaderMap| async move {
                match headers.get("authorization") {
                    Some(value) if value == "Bearer good" => axum::http::StatusCode::OK,
                    Some(_) => axum::http::StatusCode::FORBIDDEN,
                    None => axum::http::StatusCode::UNAUTHORIZED,
                }
            }),
        )
        .route(
            "/broken",
            axum::routing::get(|| async { axum::http::StatusCode::INTERNAL_SERVER_ERROR }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    let verifier = |token_file: Option<PathBuf>| {
        OidcVerifier::new(OidcConfig {
            issuer: base.clone(),
            audience: "drift-sentinel".to_string(),
            jwks_url: None,
            allowed_subjects: Vec::new(),
            ca_file: None,
            token_file,
            leeway: Duration::from_secs(30),
            jwks_max_age: Duration::from_secs(60),
        })
        .unwrap()
    };
    let url = format!("{base}/doc");
    let shown = |verifier: OidcVerifier| {
        let url = url.clone();
        async move { verifier.get_json(&url).await.unwrap_err().to_string() }
    };
    let path = token_file.display().to_string();
    assert_eq!(
        shown(verifier(None)).await,
        "HTTP 401 (no token: auth.oidc.tokenFile is not set)"
    );
    // The OS's own words follow (Linux: "No such file or directory (os error 2)").
    let unreadable = shown(verifier(Some(token_file.clone()))).await;
    assert!(
        unreadable.starts_with(&format!(
            "HTTP 401 (no token: auth.oidc.tokenFile {path} cannot be read: "
        )) && unreadable.ends_with(')'),
        "{unreadable}"
    );
    std::fs::write(&token_file, "\n").unwrap();
    assert_eq!(
        shown(verifier(Some(token_file.clone()))).await,
        format!("HTTP 401 (no token: auth.oidc.tokenFile {path} is empty)")
    );
    std::fs::write(&token_file, "stale\n").unwrap();
    assert_eq!(
        shown(verifier(Some(token_file.clone()))).await,
        format!("HTTP 403 (the token of auth.oidc.tokenFile {path} was sent)")
    );
    // Only a refusal (401, 403) is about the token: another status gets no word of it, nor a
    // 404 of a wrong path.
    for (route, expected) in [("/broken", "HTTP 500"), ("/nowhere", "HTTP 404")] {
        let error = verifier(Some(token_file.clone()))
            .get_json(&format!("{base}{route}"))
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(error, expected);
    }
    std::fs::write(&token_file, "good\n").unwrap();
    // Accepted: what fails now is the empty body, not the token.
    let accepted = verifier(Some(token_file)).get_json(&url).await;
    assert!(matches!(accepted, Err(GetError::Body(_))), "{accepted:?}");
}
