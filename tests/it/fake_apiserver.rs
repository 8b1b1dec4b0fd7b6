//! A scripted fake Kubernetes API server on loopback, in the pattern of kube-rs/controller-rs's
//! `fixtures.rs`: a scenario states, in order, which requests it expects and what each gets. A
//! request that is not the next expected one (method, path, every query parameter, the bearer
//! token from the kubeconfig, and for a write its content type and JSON body) is answered `500`
//! and recorded; every write is kept as received ([`FakeApiServer::writes`]); [`FakeApiServer::verify`]
//! fails the test on any such request and on expected requests never made. Answers are recorded
//! Knative objects from `../shared/fixtures/`, shaped as the API server lists them (items
//! without `apiVersion` and `kind`). An expected request can be held behind a [`Gate`] until
//! the test opens it, to keep a resync pass running for as long as the test needs.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// The bearer token the fake server requires (from the kubeconfig it writes).
pub(crate) const TOKEN: &str = "fake-sa-token-7f3a";

/// One expected request and its answer.
#[derive(Debug, Clone)]
pub(crate) struct Expect {
    method: &'static str,
    /// A write's content type and body (JSON, compared as values), as they must arrive.
    sent: Option<(String, Value)>,
    path: String,
    query: BTreeMap<String, String>,
    status: u16,
    body: Value,
    gate: Option<Gate>,
}

/// Holds the answer of an expected request until [`Gate::open`].
#[derive(Debug, Clone)]
pub(crate) struct Gate(Arc<tokio::sync::Semaphore>);

impl Default for Gate {
    fn default() -> Gate {
        Gate::new()
    }
}

impl Gate {
    /// A closed gate.
    pub(crate) fn new() -> Gate {
        Gate(Arc::new(tokio::sync::Semaphore::new(0)))
    }

    /// Lets the held answer (and any later one behind this gate) go.
    pub(crate) fn open(&self) {
        self.0.add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    }

    async fn wait(&self) {
        let _ = self.0.acquire().await;
    }
}

impl Expect {
    /// A `GET path?query` answered `200` with `body`.
    pub(crate) fn get(path: &str, query: &[(&str, &str)], body: Value) -> Expect {
        Expect {
            method: "GET",
            sent: None,
            path: path.to_string(),
            query: query
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
            status: 200,
            body,
            gate: None,
        }
    }

    /// A write (`PATCH`, `POST`, `DELETE`) of exactly `content_type` and `body` to
    /// `path?query`, answered `status` with `answer`.
    pub(crate) fn write(
        method: &'static str,
        path: &str,
        query: &[(&str, &str)],
        (content_type, body): (&str, Value),
        status: u16,
        answer: Value,
    ) -> Expect {
        Expect {
            method,
            sent: Some((content_type.to_string(), body)),
            status,
            ..Expect::get(path, query, answer)
        }
    }

    /// The same, answered only once `gate` is open.
    pub(crate) fn held(mut self, gate: &Gate) -> Expect {
        self.gate = Some(gate.clone());
        self
    }

    /// A `GET path?query` answered with a Kubernetes `Status` failure.
    pub(crate) fn fail(path: &str, query: &[(&str, &str)], code: u16, reason: &str) -> Expect {
        let mut expect = Expect::get(
            path,
            query,
            json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": format!("fake API server says {reason}"),
                "reason": reason,
                "code": code,
            }),
        );
        expect.status = code;
        expect
    }
}

/// A list response: `items` lose `apiVersion`/`kind` as in a real list.
pub(crate) fn list(
    kind: &str,
    resource_version: &str,
    continue_token: Option<&str>,
    items: &[Value],
) -> Value {
    let items: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut item = item.clone();
            if let Some(map) = item.as_object_mut() {
                map.remove("apiVersion");
                map.remove("kind");
            }
            item
        })
        .collect();
    let mut metadata = json!({ "resourceVersion": resource_version });
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
    }
    json!({ "kind": format!("{kind}List"), "apiVersion": "v1", "metadata": metadata, "items": items })
}

#[derive(Default)]
struct State {
    script: VecDeque<Expect>,
    served: Vec<String>,
    unexpected: Vec<String>,
    /// Every write's method, path and query, content type and body, as received.
    writes: Vec<(String, String, Value)>,
}

/// The running fake server.
pub(crate) struct FakeApiServer {
    /// Its address.
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeApiServer {
    /// Starts serving `script`.
    pub(crate) async fn start(script: Vec<Expect>) -> FakeApiServer {
        let state = Arc::new(Mutex::new(State {
            script: script.into(),
            ..State::default()
        }));
        let shared = Arc::clone(&state);
        let app = axum::Router::new().fallback(move |request: Request<Body>| {
            let state = Arc::clone(&shared);
            async move {
                let (gate, response) = answer(&state, request).await;
                if let Some(gate) = gate {
                    gate.wait().await;
                }
                response
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeApiServer { addr, state, task }
    }

    /// Requests answered as expected, in order (`path?query`).
    pub(crate) fn served(&self) -> Vec<String> {
        self.state.lock().unwrap().served.clone()
    }

    /// Every write received (expected or not): `METHOD path?query`, content type, JSON body.
    pub(crate) fn writes(&self) -> Vec<(String, String, Value)> {
        self.state.lock().unwrap().writes.clone()
    }

    /// Fails on unexpected requests and on expected requests never made.
    pub(crate) fn verify(&self) {
        let state = self.state.lock().unwrap();
        assert!(
            state.unexpected.is_empty(),
            "unexpected requests: {:#?}",
            state.unexpected
        );
        assert!(
            state.script.is_empty(),
            "expected requests never made: {:#?}",
            state.script
        );
    }

    /// Writes a kubeconfig whose context `context` points here with [`TOKEN`].
    pub(crate) fn kubeconfig(&self, dir: &Path, context: &str) -> PathBuf {
        kubeconfig(self.addr, dir, context)
    }
}

/// Writes `dir/kubeconfig`, whose context `context` points at `addr` with [`TOKEN`] (and whose
/// current context is another one, so only an explicit `context` reaches `addr`).
pub(crate) fn kubeconfig(addr: SocketAddr, dir: &Path, context: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{addr}\n\
         contexts:\n- name: other\n  context:\n    cluster: nowhere\n    user: fake\n\
         - name: {context}\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\n\
         current-context: other\nusers:\n- name: fake\n  user:\n    token: {TOKEN}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// The answer to `request`, and the gate it waits behind, if any.
async fn answer(state: &Mutex<State>, request: Request<Body>) -> (Option<Gate>, Response) {
    let (parts, body) = request.into_parts();
    let uri = parts.uri.clone();
    let method = parts.method.to_string();
    let path = uri.path().to_string();
    let query: BTreeMap<String, String> = reqwest::Url::parse(&format!("http://fake{uri}"))
        .map(|url| url.query_pairs().into_owned().collect())
        .unwrap_or_default();
    let authorized = parts
        .headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        == Some(&format!("Bearer {TOKEN}"));
    let content_type = parts
        .headers
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_string();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let sent: Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    let mut state = state.lock().unwrap();
    let described = format!("{method} {uri}");
    if method != "GET" {
        state
            .writes
            .push((described.clone(), content_type.clone(), sent.clone()));
    }
    let matches = state.script.front().is_some_and(|expect| {
        expect.method == method
            && expect.path == path
            && expect.query == query
            && authorized
            && match &expect.sent {
                Some((wanted_type, wanted_body)) => {
                    *wanted_type == content_type && *wanted_body == sent
                }
                None => bytes.is_empty(),
            }
    });
    if !matches {
        let wanted = state
            .script
            .front()
            .map(|expect| {
                format!(
                    "{} {} {:?} {:?}",
                    expect.method, expect.path, expect.query, expect.sent
                )
            })
            .unwrap_or_else(|| "nothing".to_string());
        state.unexpected.push(format!(
            "{described} {content_type:?} {sent} (authorized: {authorized}); expected {wanted}"
        ));
        return (
            None,
            (StatusCode::INTERNAL_SERVER_ERROR, "unexpected request").into_response(),
        );
    }
    let expect = state.script.pop_front().unwrap();
    state.served.push(match method.as_str() {
        "GET" => format!("{path}?{}", encode(&query)),
        _ => format!("{method} {path}?{}", encode(&query)),
    });
    let response = (
        StatusCode::from_u16(expect.status).unwrap(),
        [("content-type", "application/json")],
        expect.body.to_string(),
    )
        .into_response();
    (expect.gate, response)
}

fn encode(query: &BTreeMap<String, String>) -> String {
    query
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join("&")
}
