//! Re-check on demand: `POST /api/v1/resync`, `GET /api/v1/resync` and the dashboard's
//! "Re-check now" button. First against the router, with no resync loop and then with a control
//! the test drives by hand; then against the real binary, whose resync lists the scripted fake
//! Kubernetes API server, held open on a page while the test looks.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use drift_sentinel::pipeline::{FinishedPass, PassOutcome, ResyncTrigger};
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::fake_apiserver::{list, Expect, FakeApiServer, Gate};
use crate::resync::{failed_service, ready_services, SERVICES};
use crate::support::{self, body_bytes, TestApp};

const NOW: i64 = 1_700_000_000_000;

/// Sends `method path` with `headers` to the test app's router: status, headers and body text.
async fn call(
    app: &TestApp,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, axum::http::HeaderMap, String) {
    let mut request = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = app
        .router
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = String::from_utf8(body_bytes(response).await).unwrap();
    (status, headers, body)
}

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"))
}

fn app() -> TestApp {
    support::app_with_audit(std::sync::Arc::new(|| NOW))
}

#[tokio::test]
async fn without_a_resync_loop_a_post_is_a_409_resync_off_and_the_status_says_off() {
    let app = app();
    let (status, _, body) = call(&app, "GET", "/api/v1/resync", &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        json_of(&body),
        json!({"enabled": false, "running": null, "lastPass": null, "nextPassAt": null})
    );
    let (status, _, body) = call(&app, "POST", "/api/v1/resync", &[]).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(json_of(&body)["code"], "resync_off");
    assert!(!app.resync.claimed());

    // The dashboard says so and offers no button; a posted button is refused the same way.
    let (status, _, page) = call(&app, "GET", "/ui", &[]).await;
    assert_eq!(status, 200);
    assert!(page.contains("Resync is off"), "{page}");
    assert!(!page.contains("action=\"/ui/resync\""), "{page}");
    let (status, _, page) = call(&app, "POST", "/ui/resync", &[]).await;
    assert_eq!(status, 409);
    assert!(page.contains("Resync is off"), "{page}");
}

#[tokio::test]
async fn a_post_claims_a_pass_and_a_second_is_refused_until_that_pass_has_ended() {
    let app = app();
    app.resync.attach();
    let (status, headers, body) = call(&app, "POST", "/api/v1/resync", &[]).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(headers["location"], "/api/v1/resync");
    let started = json_of(&body);
    assert_eq!(started["enabled"], true);
    assert_eq!(started["running"]["trigger"], "api");
    assert_eq!(started["running"]["startedAt"], "2023-11-14T22:13:20.000Z");
    assert!(app.resync.claimed(), "the pass is claimed for the loop");

    let (status, _, body) = call(&app, "POST", "/api/v1/resync", &[]).await;
    assert_eq!(status, 409, "{body}");
    let refused = json_of(&body);
    assert_eq!(refused["code"], "resync_running");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("started by api"),
        "{refused}"
    );

    // The loop begins the claimed pass and reports its progress.
    let begun = app.resync.begin(NOW + 5, 2);
    assert_eq!(begun.trigger, ResyncTrigger::Api);
    app.resync.resource_done(5);
    let (_, _, body) = call(&app, "GET", "/api/v1/resync", &[]).await;
    let running = json_of(&body)["running"].clone();
    assert_eq!(
        (
            &running["resources"],
            &running["resourcesDone"],
            &running["listed"]
        ),
        (&json!(2), &json!(1), &json!(5))
    );
    assert_eq!(
        call(&app, "POST", "/api/v1/resync", &[]).await.0,
        409,
        "still running"
    );

    app.resync.finish(
        FinishedPass {
            trigger: begun.trigger,
            started_at: begun.started_at,
            finished_at: NOW + 2000,
            outcome: PassOutcome::Incomplete,
            listed: 5,
            missed: 2,
            deleted: 0,
            drifts_found: [
                ("not_ready".to_string(), 1),
                ("traffic_drift".to_string(), 2),
            ]
            .into(),
            rejected: 0,
            conflicts: 0,
            errors: [("forbidden".to_string(), 1)].into(),
            first_error: Some(
                "listing v1 ConfigMap: the API server answered 403 Forbidden: no".to_string(),
            ),
        },
        Some(NOW + 3_600_000),
    );
    let (_, _, body) = call(&app, "GET", "/api/v1/resync", &[]).await;
    let status = json_of(&body);
    assert_eq!(status["running"], Value::Null);
    assert_eq!(status["nextPassAt"], "2023-11-14T23:13:20.000Z");
    assert_eq!(
        status["lastPass"],
        json!({
            "trigger": "api",
            "startedAt": "2023-11-14T22:13:20.000Z",
            "finishedAt": "2023-11-14T22:13:22.000Z",
            "outcome": "incomplete",
            "listed": 5,
            "missed": 2,
            "deleted": 0,
            "driftsFound": 3,
            "driftsFoundByClass": {"not_ready": 1, "traffic_drift": 2},
            "rejected": 0,
            "conflicts": 0,
            "errors": {"forbidden": 1},
            "firstError": "listing v1 ConfigMap: the API server answered 403 Forbidden: no",
        })
    );
    assert_eq!(
        call(&app, "POST", "/api/v1/resync", &[]).await.0,
        202,
        "free again"
    );
    // Like every route, it takes no parameter it does not know.
    let (status, _, body) = call(&app, "POST", "/api/v1/resync?force=1", &[]).await;
    assert_eq!(
        (status, json_of(&body)["code"].clone()),
        (400, json!("invalid_query"))
    );
}

#[tokio::test]
async fn the_dashboard_button_starts_a_pass_but_not_from_another_site() {
    let app = app();
    app.resync.attach();
    let (status, _, page) = call(&app, "GET", "/ui", &[]).await;
    assert_eq!(status, 200);
    assert!(
        page.contains(
            "<form method=\"post\" action=\"/ui/resync\" id=\"resync-form\"><button>Re-check now</button></form>"
        ),
        "{page}"
    );
    assert!(page.contains("No pass has ended yet."), "{page}");

    // Another site's page posting the button is refused before anything is started.
    let (status, _, _) = call(
        &app,
        "POST",
        "/ui/resync",
        &[
            ("host", "127.0.0.1:8080"),
            ("origin", "https://evil.example"),
            ("sec-fetch-site", "cross-site"),
        ],
    )
    .await;
    assert_eq!(status, 403);
    assert!(!app.resync.claimed(), "a refused post starts nothing");

    // The dashboard's own post starts it and returns to the front page, which shows it running.
    let (status, headers, _) = call(
        &app,
        "POST",
        "/ui/resync",
        &[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin"),
            ("content-type", "application/x-www-form-urlencoded"),
        ],
    )
    .await;
    assert_eq!(status, 303);
    assert_eq!(headers["location"], "/ui");
    assert!(app.resync.claimed());
    let (_, _, page) = call(&app, "GET", "/ui", &[]).await;
    assert!(page.contains("id=\"resync-running\""), "{page}");
    assert!(page.contains("(on request)"), "{page}");
    assert!(
        page.contains("<button disabled>Re-check running…</button>"),
        "{page}"
    );
    let (status, _, page) = call(&app, "POST", "/ui/resync", &[]).await;
    assert_eq!(status, 409);
    assert!(page.contains("already running"), "{page}");
}

/// The real binary, serving on a free port; killed when dropped.
pub(crate) struct Process {
    child: Child,
    pub(crate) base: String,
}

impl Process {
    pub(crate) fn start(config: &Path, log: &Path) -> Process {
        Process::start_at(config, log, free_port())
    }

    /// The binary on `port` (for a peer that must know the address before it starts).
    pub(crate) fn start_at(config: &Path, log: &Path, port: u16) -> Process {
        let out = std::fs::File::create(log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_drift-sentinel"))
            .args(["serve", "--config"])
            .arg(config)
            .env("PORT", port.to_string())
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("DRIFT_SENTINEL_CONFIG")
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .spawn()
            .expect("binary starts");
        Process {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }
}

/// A loopback port free now.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` until it gives a value, failing with `what` and the log after a generous
/// deadline (a bound on a hang, not a claim about how fast anything is).
pub(crate) async fn until<T, F, Fut>(what: &str, log: &Path, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const API_TOKEN: &str = "resync-api-token-1c9e";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_runs_a_pass_on_request_and_shows_it_in_the_api_and_the_metrics() {
    let ready = ready_services();
    let (aaa, bbb, ccc) = (ready[0].clone(), ready[1].clone(), ready[2].clone());
    let gate = Gate::new();
    let script = vec![
        // The scheduled pass at start.
        Expect::get(
            SERVICES,
            &[("limit", "500")],
            list("Service", "90000", None, &[aaa, bbb.clone(), ccc.clone()]),
        ),
        // The requested pass, held open on its page until the test has looked: `aaa` is gone
        // and `example`, whose Revision failed, is new.
        Expect::get(
            SERVICES,
            &[("limit", "500")],
            list("Service", "90500", None, &[bbb, ccc, failed_service()]),
        )
        .held(&gate),
    ];
    let fake = FakeApiServer::start(script).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = fake.kubeconfig(dir.path(), "fake-ctx");
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "store:\n  path: {db}\n\
             api:\n  token: {API_TOKEN}\n\
             channels:\n  - {{name: log, type: log}}\n\
             routes:\n  - {{channels: [log], groupWait: 0s, groupInterval: 0s}}\n\
             resync:\n  enabled: true\n  interval: 1h\n  kubeconfig: {kubeconfig}\n  context: fake-ctx\n\
             \x20 resources:\n    - {{apiVersion: serving.knative.dev/v1, kind: Service}}\n",
            db = dir.path().join("resync.db").display(),
            kubeconfig = kubeconfig.display(),
        ),
    )
    .unwrap();
    let log = dir.path().join("drift-sentinel.log");
    let process = Process::start(&config, &log);
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let base = process.base.clone();
    let status = || {
        let request = client
            .get(format!("{base}/api/v1/resync"))
            .bearer_auth(API_TOKEN);
        async move {
            let response = request.send().await.ok()?;
            assert_eq!(response.status(), 200);
            response.json::<Value>().await.ok()
        }
    };
    let post = |token: Option<&str>| {
        let mut request = client.post(format!("{base}/api/v1/resync"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move {
            let response = request.send().await.unwrap();
            let code = response.status().as_u16();
            (code, response.json::<Value>().await.unwrap_or(Value::Null))
        }
    };

    // The pass at start ends on its own schedule.
    let first = until("the scheduled pass at start", &log, || {
        let fetched = status();
        async move {
            fetched
                .await
                .filter(|status| status["lastPass"]["trigger"] == "schedule")
        }
    })
    .await;
    assert_eq!(first["enabled"], true);
    assert_eq!(first["running"], Value::Null);
    assert_eq!(first["lastPass"]["outcome"], "complete", "{first}");
    assert_eq!(
        (
            &first["lastPass"]["listed"],
            &first["lastPass"]["missed"],
            &first["lastPass"]["deleted"]
        ),
        (&json!(3), &json!(3), &json!(0)),
        "{first}"
    );
    assert!(first["nextPassAt"].is_string(), "{first}");

    // Without the token nothing starts: not through the API, not through the dashboard.
    let (code, body) = post(None).await;
    assert_eq!((code, &body["code"]), (401, &json!("unauthorized")));
    let response = client
        .post(format!("{base}/ui/resync"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(status().await.unwrap()["running"], Value::Null);

    // With it, a pass starts; a second request while it runs is refused.
    let (code, started) = post(Some(API_TOKEN)).await;
    assert_eq!(code, 202, "{started}");
    assert_eq!(started["running"]["trigger"], "api", "{started}");
    let (code, refused) = post(Some(API_TOKEN)).await;
    assert_eq!(code, 409, "{refused}");
    assert_eq!(refused["code"], "resync_running");

    // The pass is held on its page: the API shows it running, and the dashboard with it.
    until("the requested pass's list request", &log, || {
        let served = fake.served().len();
        async move { (served == 2).then_some(()) }
    })
    .await;
    let running = status().await.unwrap();
    assert_eq!(running["running"]["trigger"], "api", "{running}");
    assert_eq!(running["running"]["resources"], 1, "{running}");
    assert_eq!(running["running"]["resourcesDone"], 0, "{running}");
    assert_eq!(
        running["lastPass"]["trigger"], "schedule",
        "the last pass that ended is still the first"
    );
    let page = client
        .get(format!("{base}/ui"))
        .bearer_auth(API_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("<button disabled>Re-check running…</button>"),
        "{page}"
    );

    gate.open();
    let done = until("the requested pass to end", &log, || {
        let fetched = status();
        async move {
            fetched.await.filter(|status| {
                status["running"].is_null() && status["lastPass"]["trigger"] == "api"
            })
        }
    })
    .await;
    let pass = &done["lastPass"];
    assert_eq!(pass["outcome"], "complete", "{done}");
    assert_eq!(
        (&pass["listed"], &pass["missed"], &pass["deleted"]),
        (&json!(3), &json!(1), &json!(1)),
        "example is new, aaa is gone: {done}"
    );
    assert_eq!(pass["driftsFoundByClass"]["not_ready"], 1, "{done}");
    let by_class: u64 = pass["driftsFoundByClass"]
        .as_object()
        .unwrap()
        .values()
        .map(|count| count.as_u64().unwrap())
        .sum();
    assert_eq!(pass["driftsFound"], by_class, "{done}");
    assert!(done["nextPassAt"].is_string(), "{done}");

    let metrics = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "drift_sentinel_resync_passes_total{trigger=\"schedule\",outcome=\"complete\"} 1",
        "drift_sentinel_resync_passes_total{trigger=\"api\",outcome=\"complete\"} 1",
        "drift_sentinel_resync_objects_listed 3",
        "drift_sentinel_resync_drifts_found_total{class=\"not_ready\"} 1",
    ] {
        assert!(
            metrics.lines().any(|candidate| candidate == line),
            "{line} missing from:\n{metrics}"
        );
    }
    let page = client
        .get(format!("{base}/ui"))
        .bearer_auth(API_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("<button>Re-check now</button>"), "{page}");
    assert!(
        page.contains("(on request): 3 listed, 1 missed, 1 deleted"),
        "{page}"
    );
    fake.verify();
    drop(process);
}
