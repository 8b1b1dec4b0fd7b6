//! Shared test helpers: fixtures from `tests/fixtures/knative` (copied from public Knative
//! sources), events shaped exactly as ApiServerSource sends them, and a router on a test store.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use drift_core::classify::Rules;
use drift_core::decode::ClusterNames;
use drift_model::time::Clock;
use drift_sentinel::ingest::{self, AppState};
use drift_sentinel::metrics::Metrics;
use drift_sentinel::pipeline::{self, Pipeline};
use drift_store::testing::TestStore;
use serde_json::{json, Value};

/// Path of a fixture file.
pub(crate) fn fixture_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/knative")
        .join(relative)
}

/// Merges `patch` into `target` (objects key by key, anything else replaced).
pub(crate) fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (target, patch) => *target = patch.clone(),
    }
}

/// A YAML fixture as JSON.
pub(crate) fn fixture_yaml(relative: &str) -> Value {
    let text = std::fs::read_to_string(fixture_path(relative)).expect("fixture exists");
    serde_saphyr::from_str(&text).expect("fixture is YAML")
}

/// The current-shape Revision from the rguske fixture (scaled to zero, ready).
pub(crate) fn revision() -> Value {
    fixture_yaml(
        "serving/rguske-github-io__knative-serving-unwrapped__revision-knative-webapp-00001.yaml",
    )
}

/// A structured-mode ApiServerSource CloudEvent for `object`.
pub(crate) fn structured_event(id: &str, verb: &str, object: &Value) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    json!({
        "specversion": "1.0",
        "id": id,
        "source": "https://10.96.0.1:443",
        "type": format!("dev.knative.apiserver.resource.{verb}"),
        "subject": format!("/apis/{api_version}/namespaces/{namespace}/{}s/{name}", kind.to_lowercase()),
        "time": "2023-10-09T21:36:22Z",
        "datacontenttype": "application/json",
        "apiversion": api_version,
        "kind": kind,
        "name": name,
        "namespace": namespace,
        "knativearrivaltime": "2023-10-09T21:36:22.1Z",
        "data": object,
    })
}

/// The headers of `event` (a structured-mode event) in binary mode, as Knative's Broker sends
/// them: one `ce-` header per attribute and extension (not `data`, whose content type is the
/// request's), then the dispatcher's own `prefer` and `kn-namespace`.
pub(crate) fn binary_headers(event: &Value) -> Vec<(String, String)> {
    let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
    for (key, value) in event.as_object().expect("event object") {
        if key == "data" || key == "datacontenttype" {
            continue;
        }
        let text = value
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| value.to_string());
        headers.push((format!("ce-{key}"), text));
    }
    headers.push(("prefer".to_string(), "reply".to_string()));
    headers.push(("kn-namespace".to_string(), "drift-sentinel".to_string()));
    headers
}

/// The same event as a binary-mode request, as Knative's Broker sends it.
pub(crate) fn binary_request(event: &Value) -> Request<Body> {
    let mut builder = Request::post("/");
    for (name, value) in binary_headers(event) {
        builder = builder.header(name, value);
    }
    builder
        .body(Body::from(
            serde_json::to_vec(&event["data"]).expect("json"),
        ))
        .expect("request")
}

/// The event as a structured-mode request.
pub(crate) fn structured_request(event: &Value) -> Request<Body> {
    Request::post("/")
        .header("content-type", "application/cloudevents+json")
        .body(Body::from(serde_json::to_vec(event).expect("json")))
        .expect("request")
}

/// Events as a batch-mode request.
pub(crate) fn batch_request(events: &[Value]) -> Request<Body> {
    Request::post("/")
        .header("content-type", "application/cloudevents-batch+json")
        .body(Body::from(serde_json::to_vec(events).expect("json")))
        .expect("request")
}

/// The three content modes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ContentMode {
    Binary,
    Structured,
    Batch,
}

pub(crate) const MODES: [ContentMode; 3] = [
    ContentMode::Binary,
    ContentMode::Structured,
    ContentMode::Batch,
];

/// One event as a request in the given mode.
pub(crate) fn request(mode: ContentMode, event: &Value) -> Request<Body> {
    match mode {
        ContentMode::Binary => binary_request(event),
        ContentMode::Structured => structured_request(event),
        ContentMode::Batch => batch_request(std::slice::from_ref(event)),
    }
}

/// A router over a test store (SQLite in a temporary file that a test can make fail or block),
/// with its parts for inspection.
pub(crate) struct TestApp {
    pub router: axum::Router,
    pub store: TestStore,
    pub metrics: Arc<Metrics>,
    pub draining: Arc<AtomicBool>,
    pub pipeline: Pipeline,
    /// The API's resync control: no loop is attached (requests answer `resync_off`) until a test
    /// attaches one.
    pub resync: Arc<drift_sentinel::pipeline::ResyncControl>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.store.set_blocked(false);
        self.store.set_block_at(None);
        self.pipeline.shutdown();
    }
}

/// What a test app is built with; `Options::default()` is `app()`.
struct Options {
    queue_capacity: usize,
    body_limit: usize,
    in_flight: Option<usize>,
    clock: Clock,
    ingest_auth: drift_sentinel::ingest::auth::IngestAuth,
    request_timeout: std::time::Duration,
    body_pace: drift_sentinel::ingest::admission::BodyPace,
    capacity: drift_core::classify::Capacity,
    /// The API reads the test store's audit side (else it has none: `503`).
    audit: bool,
    /// `store.retention`: resolved drifts older than this are pruned.
    audit_retention: std::time::Duration,
    /// The clusters this app's shard owns.
    shard: drift_core::config::ShardConfig,
    /// The compiled `remediation:` section.
    remediation: drift_core::remediate::Policy,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            queue_capacity: 64,
            body_limit: 4 * 1024 * 1024,
            in_flight: None,
            clock: drift_model::time::system_clock(),
            ingest_auth: drift_sentinel::ingest::auth::IngestAuth::Open,
            request_timeout: std::time::Duration::from_secs(10),
            body_pace: drift_sentinel::ingest::admission::BodyPace::default(),
            capacity: drift_core::classify::Capacity::default(),
            audit: false,
            audit_retention: std::time::Duration::from_secs(24 * 3600),
            shard: Default::default(),
            remediation: Default::default(),
        }
    }
}

/// Builds a test app whose API and dashboard read the test store (`app.store`) and whose
/// clock is `clock`; resolved drifts are kept 90 days (the shipped `store.retention`).
pub(crate) fn app_with_audit(clock: Clock) -> TestApp {
    build(Options {
        clock,
        audit: true,
        audit_retention: std::time::Duration::from_secs(90 * 24 * 3600),
        ..Options::default()
    })
}

/// Builds a test app whose ingest requires `auth`.
pub(crate) fn app_with_auth(auth: drift_sentinel::ingest::auth::IngestAuth) -> TestApp {
    build(Options {
        ingest_auth: auth,
        ..Options::default()
    })
}

/// Builds a test app whose ingest holds at most `in_flight` request bytes at once.
pub(crate) fn app_with_budget(body_limit: usize, in_flight: usize) -> TestApp {
    build(Options {
        body_limit,
        in_flight: Some(in_flight),
        ..Options::default()
    })
}

/// Builds a test app whose engine keeps at most `capacity` state.
pub(crate) fn app_with_capacity(capacity: drift_core::classify::Capacity) -> TestApp {
    build(Options {
        capacity,
        ..Options::default()
    })
}

/// Builds a test app.
pub(crate) fn app_with(queue_capacity: usize, body_limit: usize, clock: Clock) -> TestApp {
    build(Options {
        queue_capacity,
        body_limit,
        clock,
        ..Options::default()
    })
}

/// Builds a test app whose request bodies must keep `pace`, with a budget of `in_flight` bytes
/// for bodies of at most `body_limit`.
pub(crate) fn app_with_pace(
    body_limit: usize,
    in_flight: usize,
    pace: drift_sentinel::ingest::admission::BodyPace,
) -> TestApp {
    build(Options {
        body_limit,
        in_flight: Some(in_flight),
        request_timeout: std::time::Duration::from_secs(30),
        body_pace: pace,
        ..Options::default()
    })
}

/// Builds a test app with `routes` in place of the API and dashboard.
pub(crate) fn app_with_routes(routes: axum::Router) -> TestApp {
    let mut app = app();
    let state = AppState {
        ingest_auth: drift_sentinel::ingest::auth::IngestAuth::Open,
        pipeline: app.pipeline.clone(),
        clusters: Arc::new(ClusterNames {
            default: "test".into(),
            by_source: Default::default(),
        }),
        metrics: Arc::clone(&app.metrics),
        draining: Arc::clone(&app.draining),
        body_limit: 4 * 1024 * 1024,
        in_flight_limit: 64 * 1024 * 1024,
        body_pace: drift_sentinel::ingest::admission::BodyPace::default(),
        shard: Arc::new(Default::default()),
        lease: Arc::new(drift_sentinel::ingest::LeaseGate::default()),
    };
    app.router = switched(
        ingest::router(state, routes, std::time::Duration::from_secs(10)),
        &app.metrics,
    );
    app
}

/// Builds a test app of a shard that owns the clusters `shard` says.
pub(crate) fn app_with_shard(shard: drift_core::config::ShardConfig) -> TestApp {
    build(Options {
        shard,
        ..Options::default()
    })
}

/// Builds a test app with the audit side (as [`app_with_audit`]) that remediates by `policy`.
pub(crate) fn app_with_remediation(clock: Clock, policy: drift_core::remediate::Policy) -> TestApp {
    build(Options {
        clock,
        audit: true,
        audit_retention: std::time::Duration::from_secs(90 * 24 * 3600),
        remediation: policy,
        ..Options::default()
    })
}

/// Builds a test app whose requests time out after `timeout` (`server.requestTimeout`).
pub(crate) fn app_with_request_timeout(timeout: std::time::Duration) -> TestApp {
    build(Options {
        request_timeout: timeout,
        ..Options::default()
    })
}

fn build(options: Options) -> TestApp {
    let Options {
        queue_capacity,
        body_limit,
        in_flight,
        clock,
        ingest_auth,
        request_timeout,
        body_pace,
        capacity,
        audit,
        audit_retention,
        shard,
        remediation,
    } = options;
    let shard = Arc::new(shard);
    let store = TestStore::new();
    let metrics = Arc::new(Metrics::new());
    let pipeline = Pipeline::start(
        Box::new(store.clone()),
        Arc::new(Rules::default()),
        pipeline::Settings {
            router: drift_core::config::router(
                &[],
                &[drift_core::config::ChannelConfig::log("log")],
            ),
            outbox_notify: Arc::new(tokio::sync::Notify::new()),
            queue_capacity,
            dedup_retention: std::time::Duration::from_secs(3600),
            audit_retention,
            heartbeat_interval: std::time::Duration::from_secs(5),
            capacity,
            max_active_silences: 1_000,
            shard: Arc::clone(&shard),
            remediation: Arc::new(remediation),
            traffic_observed: false,
        },
        clock.clone(),
        Arc::clone(&metrics),
    )
    .expect("pipeline starts");
    let draining = Arc::new(AtomicBool::new(false));
    let resync = Arc::new(drift_sentinel::pipeline::ResyncControl::new());
    let api = drift_sentinel::api::router(drift_sentinel::api::ApiState {
        audit: audit.then(|| Arc::new(store.clone()) as Arc<dyn drift_store::AuditRead>),
        token: None,
        pipeline: pipeline.clone(),
        clock: clock.clone(),
        public_url: None,
        resync: Arc::clone(&resync),
    });
    let state = AppState {
        ingest_auth,
        pipeline: pipeline.clone(),
        clusters: Arc::new(ClusterNames {
            default: "test".into(),
            by_source: Default::default(),
        }),
        metrics: Arc::clone(&metrics),
        draining: Arc::clone(&draining),
        body_limit,
        in_flight_limit: in_flight.unwrap_or(body_limit * drift_core::config::IN_FLIGHT_BODIES),
        body_pace,
        shard,
        lease: Arc::new(drift_sentinel::ingest::LeaseGate::default()),
    };
    TestApp {
        router: switched(ingest::router(state, api, request_timeout), &metrics),
        store,
        metrics,
        draining,
        pipeline,
        resync,
    }
}

/// The routes as the service serves them: through the switch of a writer replica, which
/// answers `POST /` without the router.
fn switched(routes: ingest::Routes, metrics: &Arc<Metrics>) -> axum::Router {
    let standby = ingest::Standby {
        reason: Arc::new(std::sync::RwLock::new(String::new())),
        metrics: Arc::clone(metrics),
    };
    ingest::switch(standby, Arc::new(std::sync::RwLock::new(Some(routes)))).into_router()
}

/// A test app with defaults.
pub(crate) fn app() -> TestApp {
    app_with(64, 4 * 1024 * 1024, drift_model::time::system_clock())
}

/// Reads a response body.
pub(crate) async fn body_bytes(response: axum::response::Response) -> Vec<u8> {
    use http_body_util::BodyExt;
    response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .to_vec()
}

/// A counter value from the metrics text, or 0.
pub(crate) fn metric(metrics: &Metrics, line_prefix: &str) -> f64 {
    metrics
        .render()
        .lines()
        .find(|line| line.starts_with(line_prefix))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
        .unwrap_or(0.0)
}

/// What a run of the real binary printed and how it exited.
pub(crate) struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the real binary with `args` (the subcommand first), never the environment's config, and
/// `--config` when given.
pub(crate) fn run_binary(args: &[&str], config: Option<&std::path::Path>) -> Outcome {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_drift-sentinel"));
    command.args(args).env_remove("DRIFT_SENTINEL_CONFIG");
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    let output = command.output().expect("run drift-sentinel");
    Outcome {
        code: output.status.code().expect("exited, not killed"),
        stdout: String::from_utf8_lossy(&output.stdout).to_string(),
        stderr: String::from_utf8_lossy(&output.stderr).to_string(),
    }
}

/// The engine's states of the objects a test store holds, decoded as the writer decodes them
/// at start.
pub(crate) trait StoredStates {
    /// Every stored object's state.
    fn states(&self) -> Vec<drift_core::classify::ObjectState>;
}

impl StoredStates for TestStore {
    fn states(&self) -> Vec<drift_core::classify::ObjectState> {
        self.objects()
            .iter()
            .map(|record| drift_core::classify::stored::decode(&record.body).unwrap())
            .collect()
    }
}
