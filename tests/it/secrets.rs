//! Secrets canary: Kubernetes Secret values and the tokens in channel URLs never leave the
//! process.
//!
//! The real binary runs on a real SQLite file with every channel type pointed at the contract
//! receivers (`receivers.rs`), plus channels that fail (a wrong DingTalk token: rejected inside
//! HTTP 200; a Slack webhook that is gone: 404; a Slack and a DingTalk URL on a closed port:
//! connection errors), so errors are logged and stored. A Secret with known canary values is
//! added, edited by hand (`manual_edit` fires, with a diff of its data) and reverted (resolved),
//! in all three content modes. Then the canaries (the values, their base64 forms, the URL tokens
//! and the signing secrets) are looked for in everything the service produced: its log (stdout
//! and stderr at `debug`), every request every receiver got (headers and bodies), the raw bytes
//! of the `.db`, `-wal` and `-shm` files, every API answer (drifts, one drift, deliveries, the
//! report in every format), every dashboard page, `/metrics`, and the output of
//! `drift-sentinel check` (a Secret in baseline and live, every format), `replay` and
//! `config validate`. None may appear anywhere.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::HeaderMap;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::receivers::{self, FakeClock, Receiver};
use crate::support::structured_event;

/// The Secret's values: the original, the hand-edited one, and a `stringData` value.
const VALUE: &str = "CANARY-s3cr3t-value-7f1d";
const EDITED: &str = "CANARY-rotated-value-9e2c1b";
const STRING_DATA: &str = "CANARY-string-data-pw-42x";
/// What the channel URLs and signing keys carry.
const DING_TOKEN: &str = "CANARYTOKEN";
const DING_SIGN: &str = "SECCANARYDINGSIGNINGKEY";
const SLACK_PATH: &str = "CANARYSLACKPATH";
const FEISHU_TOKEN: &str = "CANARYFEISHUTOKEN";
const FEISHU_SIGN: &str = "CANARYFEISHUSIGNINGKEY";
const WECOM_KEY: &str = "CANARYWECOMKEY";
const WHSEC: &str = "whsec_Q0FOQVJZV0VCSE9PS1NFQ1JFVEtFWQ==";
const API_TOKEN: &str = "CANARYAPITOKEN";

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Every string that must never appear, with a label for the failure message.
fn canaries() -> Vec<(String, &'static str)> {
    let mut out = vec![
        (VALUE.to_string(), "Secret value"),
        (EDITED.to_string(), "edited Secret value"),
        (STRING_DATA.to_string(), "Secret stringData value"),
        (DING_TOKEN.to_string(), "DingTalk access_token"),
        (DING_SIGN.to_string(), "DingTalk signing secret"),
        (SLACK_PATH.to_string(), "Slack webhook path"),
        (FEISHU_TOKEN.to_string(), "Feishu hook token"),
        (FEISHU_SIGN.to_string(), "Feishu signing secret"),
        (WECOM_KEY.to_string(), "WeCom key"),
        (
            WHSEC.trim_start_matches("whsec_").to_string(),
            "webhook secret",
        ),
        (API_TOKEN.to_string(), "API token"),
    ];
    for (value, label) in [
        (VALUE, "base64 Secret value"),
        (EDITED, "base64 edited Secret value"),
        (STRING_DATA, "base64 stringData value"),
    ] {
        // Without padding, so the needle matches wherever the encoding is cut or re-padded.
        out.push((b64(value).trim_end_matches('=').to_string(), label));
    }
    out
}

/// Fails naming the canary and where it was found, with some context.
fn assert_clean(place: &str, haystack: &[u8]) {
    for (needle, label) in canaries() {
        if let Some(at) = haystack
            .windows(needle.len())
            .position(|window| window == needle.as_bytes())
        {
            let start = at.saturating_sub(160);
            let end = (at + needle.len() + 160).min(haystack.len());
            panic!(
                "{label} ({needle}) leaked into {place}: …{}…",
                String::from_utf8_lossy(&haystack[start..end])
            );
        }
    }
}

fn secret(resource_version: &str, token: &str, manager_entries: Value) -> Value {
    let data = json!({"token": b64(token), "url": b64("https://user:pw@db.internal/")});
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": "payment-keys",
            "namespace": "payments",
            "uid": "5e1c2a7e-0000-4c1d-9a51-000000000001",
            "resourceVersion": resource_version,
            "creationTimestamp": "2026-11-01T00:00:00Z",
            "labels": {"app": "checkout"},
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration":
                    json!({"apiVersion": "v1", "kind": "Secret", "data": data,
                           "stringData": {"password": STRING_DATA}}).to_string()
            },
            "managedFields": manager_entries,
        },
        "data": data,
        "stringData": {"password": STRING_DATA},
    })
}

fn applied_by_ci() -> Value {
    json!([{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
            "fieldsType": "FieldsV1", "time": "2026-11-01T00:00:00Z",
            "fieldsV1": {"f:data": {".": {}, "f:token": {}, "f:url": {}},
                         "f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}},
                         "f:type": {}}}])
}

fn edited_by_hand(time: &str) -> Value {
    let mut entries = applied_by_ci();
    entries.as_array_mut().unwrap().push(json!({
        "manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "time": time, "fieldsV1": {"f:data": {"f:token": {}}}}));
    entries
}

/// An Alertmanager `POST /api/v2/alerts` that records and accepts everything.
async fn alertmanager() -> (String, Arc<std::sync::Mutex<Vec<(HeaderMap, Bytes)>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let router = axum::Router::new().route(
        "/api/v2/alerts",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let record = Arc::clone(&record);
            async move {
                record.lock().unwrap().push((headers, body));
                "{}"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (base, seen)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn real_now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

struct Process {
    child: Child,
    base: String,
    log: PathBuf,
}

impl Process {
    fn start(config: &Path, log: &Path) -> Process {
        let port = free_port();
        let out = std::fs::File::create(log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_drift-sentinel"))
            .args(["serve", "--config"])
            .arg(config)
            .env("PORT", port.to_string())
            .env("RUST_LOG", "debug")
            .env("DING_TOKEN", DING_TOKEN)
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .spawn()
            .expect("binary starts");
        Process {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log: log.to_path_buf(),
        }
    }

    fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        panic!("drift-sentinel did not stop on SIGTERM");
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn eventually(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

fn receiver_traffic(receiver: &Receiver) -> Vec<u8> {
    let log = receiver.log.lock().unwrap();
    let mut out = Vec::new();
    for (headers, body) in &log.requests {
        for (name, value) in headers {
            out.extend_from_slice(format!("{name}: {value}\n").as_bytes());
        }
        out.extend_from_slice(body.as_bytes());
        out.push(b'\n');
    }
    out
}

fn run_cli(args: &[&str], config: &Path) -> Vec<u8> {
    let output = Command::new(env!("CARGO_BIN_EXE_drift-sentinel"))
        .args(args)
        .arg("--config")
        .arg(config)
        .env("DING_TOKEN", DING_TOKEN)
        .output()
        .expect("binary runs");
    let mut all = output.stdout;
    all.extend_from_slice(&output.stderr);
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_values_and_url_tokens_never_leave_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let clock: FakeClock = Arc::new(std::sync::atomic::AtomicI64::new(real_now_ms()));
    let ticking = Arc::clone(&clock);
    let ticker = tokio::spawn(async move {
        loop {
            ticking.store(real_now_ms(), Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let ding = receivers::dingtalk(Arc::clone(&clock), DING_TOKEN, Some(DING_SIGN), None).await;
    let slack = receivers::slack(Arc::clone(&clock)).await;
    let feishu = receivers::feishu(Arc::clone(&clock), Some(FEISHU_SIGN)).await;
    let wecom = receivers::wecom(Arc::clone(&clock), WECOM_KEY).await;
    let hook = receivers::webhook(Arc::clone(&clock), WHSEC).await;
    let sink = receivers::cloudevents_sink().await;
    let (am_base, am_seen) = alertmanager().await;
    let closed = free_port();
    let db = dir.path().join("canary.db");
    let retry = "    minBackoff: 100ms\n    maxBackoff: 300ms\n    maxAttempts: 3\n";
    let config = format!(
        "store:\n  path: {db}\n\
         server:\n  drainTimeout: 3s\n\
         api:\n  token: {API_TOKEN}\n\
         channels:\n\
         \x20 - {{name: log, type: log}}\n\
         \x20 - name: hook\n    type: webhook\n    url: {hook}/hook\n    secret: {WHSEC}\n\
         \x20 - name: ding\n    type: dingtalk\n    url: {ding}/robot/send?access_token=${{DING_TOKEN}}\n    secret: {DING_SIGN}\n\
         \x20 - name: chat\n    type: slack\n    url: {slack}/services/T000/B000/XXXX\n{retry}\
         \x20 - name: lark\n    type: feishu\n    url: {feishu}/open-apis/bot/v2/hook/{FEISHU_TOKEN}\n    secret: {FEISHU_SIGN}\n\
         \x20 - name: wx\n    type: wecom\n    url: {wecom}/cgi-bin/webhook/send?key={WECOM_KEY}\n\
         \x20 - name: am\n    type: alertmanager\n    urls: ['{am_base}']\n    resendInterval: 1s\n\
         \x20 - name: broker\n    type: cloudevents\n    url: {sink}/\n\
         \x20 - name: ding-wrong-token\n    type: dingtalk\n    url: {ding}/robot/send?access_token={DING_TOKEN}-revoked\n{retry}\
         \x20 - name: ding-down\n    type: dingtalk\n    url: http://127.0.0.1:{closed}/robot/send?access_token={DING_TOKEN}\n{retry}\
         \x20 - name: slack-gone\n    type: slack\n    url: {slack}/services/T000/B000/{SLACK_PATH}\n{retry}\
         \x20 - name: slack-down\n    type: slack\n    url: http://127.0.0.1:{closed}/services/T000/B000/{SLACK_PATH}\n{retry}\
         routes:\n  - channels: [log, hook, ding, chat, lark, wx, am, broker, ding-wrong-token, ding-down, slack-gone, slack-down]\n    groupWait: 0s\n    groupInterval: 0s\n    repeatInterval: 0s\n",
        db = db.display(),
        hook = hook.base,
        ding = ding.base,
        slack = slack.base,
        feishu = feishu.base,
        wecom = wecom.base,
        sink = sink.base,
    );
    let config_path = dir.path().join("config.yaml");
    std::fs::write(&config_path, &config).unwrap();
    let log_path = dir.path().join("sentinel.log");
    let mut process = Process::start(&config_path, &log_path);
    let client = reqwest::Client::new();
    let base = process.base.clone();
    let ready = || {
        let client = client.clone();
        let url = format!("{base}/readyz");
        async move { matches!(client.get(url).send().await, Ok(response) if response.status() == 200) }
    };
    let started = Instant::now();
    while !ready().await {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "not ready: {}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Ingest in every content mode: add (binary), a hand edit (structured), the revert (batch).
    let original = secret("100", VALUE, applied_by_ci());
    let edited = secret("101", EDITED, edited_by_hand("2026-11-29T10:00:00Z"));
    let reverted = secret("102", VALUE, edited_by_hand("2026-11-29T10:05:00Z"));
    let post = |request: reqwest::RequestBuilder| async move {
        let response = request.send().await.unwrap();
        let status = response.status();
        let body = response.bytes().await.unwrap();
        assert_clean("an ingest answer", &body);
        assert_eq!(status, 202, "{}", String::from_utf8_lossy(&body));
    };
    let event = structured_event("canary-1", "add", &original);
    let mut request = client
        .post(&process.base)
        .header("content-type", "application/json");
    for (key, value) in event.as_object().unwrap() {
        if key != "data" && key != "datacontenttype" {
            request = request.header(format!("ce-{key}"), value.as_str().unwrap());
        }
    }
    post(request.body(serde_json::to_vec(&event["data"]).unwrap())).await;
    post(
        client
            .post(&process.base)
            .header("content-type", "application/cloudevents+json")
            .body(serde_json::to_vec(&structured_event("canary-2", "update", &edited)).unwrap()),
    )
    .await;
    let api = |path: &str| {
        let client = client.clone();
        let url = format!("{}{path}", process.base);
        let path = path.to_string();
        async move {
            let response = client.get(url).bearer_auth(API_TOKEN).send().await.unwrap();
            assert_eq!(response.status(), 200, "{path}");
            response.bytes().await.unwrap().to_vec()
        }
    };
    // The hand edit is a manual_edit drift whose diff names the key and carries only hashes.
    let drifts: Value = serde_json::from_slice(&api("/api/v1/drifts").await).unwrap();
    let drift = drifts["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|drift| drift["class"] == "manual_edit" && drift["name"] == "payment-keys")
        .unwrap_or_else(|| panic!("manual_edit on the Secret: {drifts}"))
        .clone();
    let id = drift["id"].as_str().unwrap().to_string();
    let detail: Value =
        serde_json::from_slice(&api(&format!("/api/v1/drifts/{id}")).await).unwrap();
    let text = detail.to_string();
    assert!(
        text.contains("/data/token"),
        "the diff names the key: {text}"
    );
    assert!(text.contains("sha256:"), "the diff shows hashes: {text}");
    assert!(text.contains("kubectl-edit"), "the actor is named: {text}");

    // Every working channel gets the alert.
    let timeout = Duration::from_secs(30);
    for (name, receiver) in [
        ("webhook", &hook),
        ("dingtalk", &ding),
        ("slack", &slack),
        ("feishu", &feishu),
        ("wecom", &wecom),
        ("cloudevents", &sink),
    ] {
        eventually(&format!("{name} delivery"), timeout, || {
            receiver
                .accepted()
                .iter()
                .any(|message| message.to_string().contains("payment-keys"))
        })
        .await;
    }
    eventually("alertmanager delivery", timeout, || {
        !am_seen.lock().unwrap().is_empty()
    })
    .await;
    post(
        client
            .post(&process.base)
            .header("content-type", "application/cloudevents-batch+json")
            .body(
                serde_json::to_vec(&[structured_event("canary-3", "update", &reverted)]).unwrap(),
            ),
    )
    .await;
    eventually("the resolve at the webhook", timeout, || {
        hook.accepted()
            .iter()
            .any(|message| message["type"] == "drift.resolved")
    })
    .await;
    // The failing channels end with stored errors: rejected (wrong token, gone) or expired.
    eventually("failing channels settle", timeout, || {
        let Ok(text) = std::fs::read_to_string(&log_path) else {
            return false;
        };
        ["ding-wrong-token", "ding-down", "slack-gone", "slack-down"]
            .iter()
            .all(|channel| {
                text.lines().any(|line| {
                    line.contains(&format!("\"channel\":\"{channel}\""))
                        && (line.contains("rejected") || line.contains("expired"))
                })
            })
    })
    .await;
    let mut stored_errors = 0;
    for state in ["rejected", "expired"] {
        let body = api(&format!("/api/v1/deliveries?state={state}")).await;
        let value: Value = serde_json::from_slice(&body).unwrap();
        for item in value["items"].as_array().unwrap() {
            if item["lastError"]
                .as_str()
                .is_some_and(|error| !error.is_empty())
            {
                stored_errors += 1;
            }
        }
        assert_clean(&format!("/api/v1/deliveries?state={state}"), &body);
    }
    assert!(
        stored_errors >= 4,
        "each failing channel stored its error ({stored_errors})"
    );

    // Every API answer and dashboard page.
    let mut pages = vec![
        "/api/v1/drifts".to_string(),
        "/api/v1/drifts?state=resolved".to_string(),
        format!("/api/v1/drifts/{id}"),
        "/api/v1/deliveries".to_string(),
        "/api/v1/deliveries?state=delivered".to_string(),
        "/api/v1/silences".to_string(),
        "/api/v1/report".to_string(),
        "/api/v1/report?format=json".to_string(),
        "/api/v1/report?format=markdown".to_string(),
        "/api/v1/report?format=html".to_string(),
        "/ui".to_string(),
        "/ui?state=resolved".to_string(),
        format!("/ui/drifts/{id}"),
        "/ui/report".to_string(),
    ];
    for item in serde_json::from_slice::<Value>(&api("/api/v1/drifts").await).unwrap()["items"]
        .as_array()
        .unwrap()
    {
        let other = item["id"].as_str().unwrap();
        pages.push(format!("/api/v1/drifts/{other}"));
        pages.push(format!("/ui/drifts/{other}"));
    }
    for page in &pages {
        assert_clean(page, &api(page).await);
    }
    let metrics = client
        .get(format!("{}/metrics", process.base))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_clean("/metrics", &metrics);

    // What the destinations received.
    for (name, receiver) in [
        ("the webhook receiver", &hook),
        ("the DingTalk receiver", &ding),
        ("the Slack receiver", &slack),
        ("the Feishu receiver", &feishu),
        ("the WeCom receiver", &wecom),
        ("the CloudEvents sink", &sink),
    ] {
        assert_clean(name, &receiver_traffic(receiver));
    }
    for (headers, body) in am_seen.lock().unwrap().iter() {
        assert_clean(
            "the Alertmanager receiver",
            format!("{headers:?}").as_bytes(),
        );
        assert_clean("the Alertmanager receiver", body);
    }

    // The store, while running (the WAL holds recent pages) and after a clean stop.
    let read_store = |when: &str| {
        for suffix in ["", "-wal", "-shm"] {
            let path = PathBuf::from(format!("{}{suffix}", db.display()));
            if let Ok(bytes) = std::fs::read(&path) {
                assert_clean(&format!("{} ({when})", path.display()), &bytes);
            }
        }
    };
    read_store("running");
    process.stop();
    read_store("stopped");

    // The process's own output.
    let mut log = Vec::new();
    std::fs::File::open(&process.log)
        .unwrap()
        .read_to_end(&mut log)
        .unwrap();
    assert!(
        String::from_utf8_lossy(&log).contains("Notification rejected"),
        "the failing channels logged their errors"
    );
    // At debug each event's line names it (its names are copied only when that line is on).
    assert!(
        String::from_utf8_lossy(&log).lines().any(|line| {
            line.contains("\"message\":\"Event processed.\"")
                && line.contains("\"name\":\"payment-keys\"")
                && line.contains("\"outcome\":\"applied\"")
        }),
        "the debug log names each event"
    );
    assert_clean("the service log", &log);

    // The CLI: config validate, replay, check.
    assert_clean(
        "config validate",
        &run_cli(
            &["config", "validate", &config_path.display().to_string()],
            &config_path,
        ),
    );
    let events_dir = dir.path().join("events");
    std::fs::create_dir(&events_dir).unwrap();
    let recorded: Vec<Value> = [
        ("r1", "add", &original),
        ("r2", "update", &edited),
        ("r3", "update", &reverted),
    ]
    .iter()
    .map(|(id, verb, object)| structured_event(id, verb, object))
    .collect();
    std::fs::write(
        events_dir.join("secret.json"),
        serde_json::to_vec(&recorded).unwrap(),
    )
    .unwrap();
    for format in ["text", "json"] {
        let output = run_cli(
            &[
                "replay",
                "--format",
                format,
                &events_dir.display().to_string(),
            ],
            &config_path,
        );
        assert!(
            String::from_utf8_lossy(&output).contains("manual_edit"),
            "replay reports the edit: {}",
            String::from_utf8_lossy(&output)
        );
        assert_clean(&format!("replay --format {format}"), &output);
    }
    let baseline = dir.path().join("baseline");
    std::fs::create_dir(&baseline).unwrap();
    std::fs::write(
        baseline.join("secret.yaml"),
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: payment-keys\n  namespace: payments\n\
             type: Opaque\ndata:\n  token: {}\nstringData:\n  password: {STRING_DATA}\n",
            b64(VALUE)
        ),
    )
    .unwrap();
    let live = dir.path().join("live.yaml");
    std::fs::write(
        &live,
        serde_saphyr::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": [edited]}))
            .unwrap(),
    )
    .unwrap();
    for format in ["text", "markdown", "json", "junit"] {
        let output = run_cli(
            &[
                "check",
                "--baseline",
                &baseline.display().to_string(),
                "--live",
                &live.display().to_string(),
                "--format",
                format,
            ],
            &config_path,
        );
        assert!(
            String::from_utf8_lossy(&output).contains("payment-keys"),
            "check reports the Secret ({format}): {}",
            String::from_utf8_lossy(&output)
        );
        assert_clean(&format!("check --format {format}"), &output);
    }
    ticker.abort();
}
