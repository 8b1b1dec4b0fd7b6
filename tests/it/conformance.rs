//! Issue 27, items 4, 5, 6 and 9, over real HTTP: cluster names, repeated CloudEvents headers,
//! the `Authorization` scheme's case, what hyper answers itself, and a shard's batch with a
//! foreign cluster.

use std::io::{Read, Write};

use serde_json::{json, Value};

use crate::support::*;

/// The real service on a loopback port with a temporary SQLite store.
struct Running {
    base: String,
    addr: std::net::SocketAddr,
    server: drift_sentinel::app::Server,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Running {
    async fn start(extra: &str) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let yaml = format!(
            "store:\n  path: {}\nchannels:\n  - {{name: log, type: log}}\n{extra}",
            dir.path().join("conformance.db").display()
        );
        let config = drift_core::config::load_str(&yaml, &|_| None).unwrap();
        let server = drift_sentinel::app::start(config, None, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let running = Running {
            base: format!("http://{}", server.addr),
            addr: server.addr,
            server,
            client: reqwest::Client::new(),
            _dir: dir,
        };
        for _ in 0..300 {
            let ready = running.client.get(format!("{}/readyz", running.base));
            if ready.send().await.is_ok_and(|r| r.status() == 200) {
                return running;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("the service did not become ready");
    }

    /// Posts `event` in binary mode with `extra` headers appended (a header already set is then
    /// sent twice), and returns the status and the JSON body (`null` when empty).
    async fn post_binary(&self, event: &Value, extra: &[(&str, &str)]) -> (u16, Value) {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.append("content-type", "application/json".parse().unwrap());
        for (key, value) in event.as_object().unwrap() {
            if key == "data" || key == "datacontenttype" {
                continue;
            }
            let text = value
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| value.to_string());
            headers.append(
                reqwest::header::HeaderName::from_bytes(format!("ce-{key}").as_bytes()).unwrap(),
                text.parse().unwrap(),
            );
        }
        for (name, value) in extra {
            headers.append(
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        let response = self
            .client
            .post(&self.base)
            .headers(headers)
            .body(serde_json::to_vec(&event["data"]).unwrap())
            .send()
            .await
            .unwrap();
        answer(response).await
    }

    async fn post_structured(&self, body: Vec<u8>, authorization: Option<&str>) -> (u16, Value) {
        let mut request = self
            .client
            .post(&self.base)
            .header("content-type", "application/cloudevents+json")
            .body(body);
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        answer(request.send().await.unwrap()).await
    }

    async fn get(&self, path: &str, authorization: Option<&str>) -> (u16, Value) {
        let mut request = self.client.get(format!("{}{path}", self.base));
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        answer(request.send().await.unwrap()).await
    }

    /// Writes `raw` bytes on a new connection and reads the whole answer (the server closes it),
    /// off the runtime that serves it.
    async fn raw(&self, raw: &[u8]) -> String {
        let addr = self.addr;
        let raw = raw.to_vec();
        tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(addr).unwrap();
            stream
                .set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            stream.write_all(&raw).unwrap();
            let mut answer = Vec::new();
            let _ = stream.read_to_end(&mut answer);
            String::from_utf8_lossy(&answer).into_owned()
        })
        .await
        .unwrap()
    }

    async fn stop(self) {
        self.server.shutdown.cancel();
        let _ = self.server.done.await;
    }
}

async fn answer(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let bytes = response.bytes().await.unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn event_of(id: &str, cluster: &str) -> Value {
    let mut event = structured_event(id, "add", &revision());
    event["cluster"] = json!(cluster);
    event
}

/// Item 4: each class of refused cluster name is a JSON 400 naming the attribute and the reason,
/// in binary and structured mode, nothing of it stored; a non-ASCII name of one script is a name.
#[tokio::test]
async fn cluster_names_that_are_not_printable_visible_single_script_or_free_are_refused() {
    let app = Running::start("").await;
    let cases = [
        ("prod\teu", "U+0009, a control or whitespace character"),
        ("prod\u{85}eu", "U+0085, a control or whitespace character"),
        ("prod eu", "U+0020, a control or whitespace character"),
        ("prod\u{200b}eu", "U+200B, an invisible character"),
        ("prod\u{202e}ue", "U+202E, an invisible character"),
        ("prod-\u{435}u", "mixes the scripts Latin, Cyrillic"),
        (
            "fleet:prod",
            "starts with \"fleet:\", reserved for fleet drifts",
        ),
    ];
    for (index, (cluster, reason)) in cases.iter().enumerate() {
        let event = event_of(&format!("bad-name-{index}"), cluster);
        // Structured mode carries any string; binary mode only what a header value may hold
        // (the tab), the rest percent-encoded as the HTTP binding says.
        let (status, body) = app
            .post_structured(serde_json::to_vec(&event).unwrap(), None)
            .await;
        assert_eq!(status, 400, "{cluster:?}: {body}");
        assert_eq!(body["code"], "invalid_event", "{cluster:?}");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains("attribute cluster (extension): ") && message.contains(reason),
            "{cluster:?}: {message}"
        );
        let mut binary = event.clone();
        binary["id"] = json!(format!("bad-name-binary-{index}"));
        binary["cluster"] = json!(percent_encoding::utf8_percent_encode(
            cluster,
            percent_encoding::NON_ALPHANUMERIC
        )
        .to_string());
        let (status, body) = app.post_binary(&binary, &[]).await;
        assert_eq!(status, 400, "binary {cluster:?}: {body}");
        assert!(body["message"].as_str().unwrap().contains(reason), "{body}");
    }
    for (index, cluster) in ["продакшн", "生产-eu", "café-prod"].iter().enumerate() {
        let event = event_of(&format!("good-name-{index}"), cluster);
        let (status, body) = app
            .post_structured(serde_json::to_vec(&event).unwrap(), None)
            .await;
        assert_eq!(status, 202, "{cluster:?}: {body}");
    }
    app.stop().await;
}

/// Item 5: a repeated `ce-*` header is a JSON 400 naming it, whichever attribute it is; the
/// event is not taken under either value.
#[tokio::test]
async fn a_repeated_cloudevents_header_is_refused_with_a_400_naming_it() {
    let app = Running::start("").await;
    for (index, header) in ["ce-cluster", "ce-type", "ce-id", "ce-source"]
        .iter()
        .enumerate()
    {
        let event = event_of(&format!("repeated-{index}"), "prod");
        let (status, body) = app.post_binary(&event, &[(header, "other")]).await;
        assert_eq!(status, 400, "{header}: {body}");
        assert_eq!(body["code"], "invalid_event");
        assert_eq!(
            body["message"],
            format!(
                "invalid CloudEvent: header {header} is repeated: a CloudEvents attribute takes one header"
            )
        );
    }
    // The same event with each header once is taken.
    let (status, body) = app
        .post_binary(&event_of("repeated-none", "prod"), &[])
        .await;
    assert_eq!(status, 202, "{body}");
    // Structured mode: a repeated member at the top level is refused too.
    let event = serde_json::to_string(&event_of("repeated-json", "prod")).unwrap();
    let twice = event.replacen(
        "\"cluster\":\"prod\"",
        "\"cluster\":\"prod\",\"cluster\":\"dev\"",
        1,
    );
    assert_ne!(event, twice);
    let (status, body) = app.post_structured(twice.into_bytes(), None).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["message"],
        "invalid CloudEvent JSON: member \"cluster\" is repeated: a CloudEvents attribute takes one member"
    );
    app.stop().await;
}

/// Item 6: the `Bearer` scheme is case-insensitive (RFC 9110 §11.1), on ingest and on the API;
/// another scheme, or the right scheme with the wrong token, is still refused.
#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive_on_ingest_and_api() {
    let app = Running::start("auth:\n  bearerToken: in-s3cret\napi:\n  token: api-s3cret\n").await;
    for (index, scheme) in ["Bearer", "bearer", "BEARER", "bEaReR"].iter().enumerate() {
        let event = event_of(&format!("scheme-{index}"), "prod");
        let (status, body) = app
            .post_structured(
                serde_json::to_vec(&event).unwrap(),
                Some(&format!("{scheme} in-s3cret")),
            )
            .await;
        assert_eq!(status, 202, "ingest {scheme}: {body}");
        let (status, body) = app
            .get("/api/v1/drifts", Some(&format!("{scheme} api-s3cret")))
            .await;
        assert_eq!(status, 200, "api {scheme}: {body}");
    }
    for authorization in [
        "Basic in-s3cret",
        "Bearerin-s3cret",
        "bearer wrong",
        "in-s3cret",
    ] {
        let event = event_of("scheme-refused", "prod");
        let (status, body) = app
            .post_structured(serde_json::to_vec(&event).unwrap(), Some(authorization))
            .await;
        assert_eq!(
            (status, &body["code"]),
            (401, &json!("unauthorized")),
            "{authorization}"
        );
        let api = authorization.replace("in-s3cret", "api-s3cret");
        let (status, _) = app.get("/api/v1/drifts", Some(&api)).await;
        assert_eq!(status, 401, "api {api}");
    }
    app.stop().await;
}

/// Tokens configured from a Secret or a file often end in a newline, which no `Authorization`
/// header can carry: the configured `api.token` and `auth.bearerToken` are compared without
/// surrounding whitespace, so the token itself is accepted (and a wrong one still is not).
#[tokio::test]
async fn configured_tokens_ending_in_a_newline_accept_the_token() {
    let app = Running::start(
        "auth:\n  bearerToken: \"in-s3cret\\n\"\napi:\n  token: \" api-s3cret\\n\"\n",
    )
    .await;
    let event = event_of("trimmed-1", "prod");
    let (status, body) = app
        .post_structured(
            serde_json::to_vec(&event).unwrap(),
            Some("Bearer in-s3cret"),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = app.get("/api/v1/drifts", Some("Bearer api-s3cret")).await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = app.get("/api/v1/drifts", Some("Bearer api-s3cre")).await;
    assert_eq!(status, 401);
    app.stop().await;
}

/// Item 6: an error answer the service makes is JSON, also for a request target axum routes
/// nowhere or that holds a percent-encoded `<`. A raw `<`, `>` or backtick in the path, or `"` in
/// the query (characters the `http` crate's URI parser refuses) never reaches the service: hyper's HTTP/1
/// parser answers it itself, `400` with an empty body and the connection closed (hyper 1.x
/// `proto/h1/role.rs` `Server::on_error`; no builder option gives it a body). This pins that
/// documented exception (README, "What it accepts"), so a hyper upgrade that changes it shows
/// here.
#[tokio::test]
async fn error_answers_are_json_and_a_raw_invalid_target_is_hyper_s_bare_400() {
    let app = Running::start("").await;
    let (status, body) = app.get("/api/v1/%3Cscript%3E", None).await;
    assert_eq!(status, 404);
    assert!(
        body["code"].is_string() && body["message"].is_string(),
        "{body}"
    );
    for request in [
        &b"GET /api/v1/<script> HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"POST /<x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        b"GET /a>b HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /a`b HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /a?q=\"x\" HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        let raw = app.raw(request).await;
        let (head, body) = raw.split_once("\r\n\r\n").expect("an answer head");
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{raw}");
        assert!(
            head.to_ascii_lowercase().contains("content-length: 0"),
            "{raw}"
        );
        assert_eq!(body, "", "hyper's own answer has no body");
    }
    // The same target percent-encoded is the service's, and JSON.
    let raw = app
        .raw(b"GET /api/v1/%3Cscript%3E HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await;
    let (head, body) = raw.split_once("\r\n\r\n").expect("an answer head");
    assert!(head.starts_with("HTTP/1.1 404"), "{raw}");
    let body: Value = serde_json::from_str(body).expect("a JSON body");
    assert!(body["code"].is_string(), "{body}");
    app.stop().await;
}

/// The answer the Broker reads as success, byte for byte as it leaves the server: `202`, an
/// explicit empty length, no body and no `ce-*` header (a body or a CloudEvent would be taken
/// as a reply). `POST /` is served by the switch without the router, so this is checked on the
/// wire, not on the router.
#[tokio::test]
async fn an_accepted_event_is_a_bare_202_on_the_wire() {
    let app = Running::start("").await;
    let body = serde_json::to_vec(&event_of("wire-1", "prod")).unwrap();
    let mut request = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/cloudevents+json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    let raw = app.raw(&request).await;
    let (head, rest) = raw.split_once("\r\n\r\n").expect("an answer head");
    assert!(head.starts_with("HTTP/1.1 202 Accepted\r\n"), "{raw}");
    let head = head.to_ascii_lowercase();
    assert!(
        head.lines().any(|line| line == "content-length: 0"),
        "{raw}"
    );
    assert!(!head.lines().any(|line| line.starts_with("ce-")), "{raw}");
    assert_eq!(rest, "", "no body");
    app.stop().await;
}

/// `HEAD` is answered as `GET` without the body, on the service's routes and on `/` (its `405`
/// names `POST`): the switch hands every request but `POST /` to the router, which does this.
#[tokio::test]
async fn head_requests_get_the_get_answer_without_a_body() {
    let app = Running::start("").await;
    for (path, status) in [("/healthz", "200"), ("/metrics", "200"), ("/", "405")] {
        let get = app
            .raw(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
            .await;
        let head = app
            .raw(format!("HEAD {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
            .await;
        let (get_head, get_body) = get.split_once("\r\n\r\n").expect("an answer head");
        let (head_head, head_body) = head.split_once("\r\n\r\n").expect("an answer head");
        assert!(
            head_head.starts_with(&format!("HTTP/1.1 {status}")),
            "{head}"
        );
        assert!(get_head.starts_with(&format!("HTTP/1.1 {status}")), "{get}");
        assert!(!get_body.is_empty(), "GET {path} has a body");
        assert_eq!(head_body, "", "HEAD {path}: no body");
        if path == "/" {
            assert!(
                head_head.to_ascii_lowercase().contains("\r\nallow: post"),
                "{head}"
            );
        }
    }
    app.stop().await;
}
