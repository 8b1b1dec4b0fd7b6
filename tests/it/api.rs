//! The drift API and dashboard against the real server, a real SQLite file, and real events.

use std::time::Duration;

use serde_json::{json, Value};

use crate::scenario::{changed, config_autoscaler, configuration, written_by};
use crate::support::{fixture_yaml, structured_event};

/// The service running on a real SQLite file (or another `store:`), with an HTTP client: the
/// harness of this file's tests and of `api_bounds.rs`.
pub(crate) struct Running {
    pub(crate) base: String,
    pub(crate) server: drift_sentinel::app::Server,
    pub(crate) client: reqwest::Client,
    _dir: tempfile::TempDir,
    next: usize,
}

impl Running {
    pub(crate) async fn start(extra: &str) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let store = format!("store:\n  path: {}\n", dir.path().join("api.db").display());
        Running::start_on(dir, &store, extra).await
    }

    /// Starts the service on the store of `store` (a `store:` section).
    pub(crate) async fn start_on(dir: tempfile::TempDir, store: &str, extra: &str) -> Running {
        let yaml = format!(
            "{store}channels:\n  - {{name: log, type: log}}\nroutes:\n  - {{channels: [log], groupWait: 0s, groupInterval: 0s}}\n{extra}"
        );
        let config = drift_core::config::load_str(&yaml, &|_| None).unwrap();
        let server = drift_sentinel::app::start(config, None, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let running = Running {
            base: format!("http://{}", server.addr),
            server,
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            _dir: dir,
            next: 0,
        };
        // On PostgreSQL the service first stands by, then takes the writer lease and loads its
        // state: ready means it is the writer.
        let ready = format!("{}/readyz", running.base);
        for _ in 0..300 {
            let response = running.client.get(&ready).send().await.unwrap();
            if response.status() == 200 {
                return running;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("the service did not become ready");
    }

    pub(crate) async fn send(&mut self, verb: &str, object: &Value) {
        self.next += 1;
        let event = structured_event(&format!("api-{}", self.next), verb, object);
        let response = self
            .client
            .post(&self.base)
            .header("content-type", "application/cloudevents+json")
            .json(&event)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202);
    }

    pub(crate) async fn get(&self, path: &str) -> (u16, Value) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub(crate) async fn text(&self, path: &str) -> (u16, String) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    /// Three config drifts (two stay firing, one is reverted) in knative-serving.
    async fn make_drifts(&mut self) -> Vec<Value> {
        let mut edited_objects = Vec::new();
        for name in ["config-autoscaler", "config-gc", "config-network"] {
            let mut base = config_autoscaler();
            base["metadata"]["name"] = json!(name);
            base["metadata"]["uid"] = json!(format!("uid-{name}"));
            self.send("add", &base).await;
            let edited = changed(&base, |c| {
                c["data"]["min-scale"] = json!("2");
                written_by(
                    c,
                    "kubectl-edit",
                    "Update",
                    json!({"f:data": {"f:min-scale": {}}}),
                    "2026-11-29T09:00:00Z",
                );
            });
            self.send("update", &edited).await;
            edited_objects.push(edited);
        }
        let reverted = changed(&edited_objects[2], |c| {
            c["data"].as_object_mut().unwrap().remove("min-scale");
        });
        self.send("update", &reverted).await;
        edited_objects
    }

    pub(crate) async fn stop(self) {
        self.server.shutdown.cancel();
        let _ = self.server.done.await;
    }
}

async fn eventually<F, Fut>(mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..100 {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn drifts_list_filters_and_pages() {
    let mut app = Running::start("").await;
    app.make_drifts().await;
    let (status, all) = app.get("/api/v1/drifts").await;
    assert_eq!(status, 200);
    assert_eq!(all["items"].as_array().unwrap().len(), 3);
    let count = |value: &Value| value["items"].as_array().unwrap().len();
    assert_eq!(count(&app.get("/api/v1/drifts?state=firing").await.1), 2);
    assert_eq!(count(&app.get("/api/v1/drifts?state=open").await.1), 2);
    assert_eq!(count(&app.get("/api/v1/drifts?state=resolved").await.1), 1);
    assert_eq!(count(&app.get("/api/v1/drifts?state=pending").await.1), 0);
    assert_eq!(
        count(&app.get("/api/v1/drifts?class=config_drift").await.1),
        3
    );
    assert_eq!(count(&app.get("/api/v1/drifts?class=not_ready").await.1), 0);
    assert_eq!(
        count(&app.get("/api/v1/drifts?severity=warning").await.1),
        3
    );
    assert_eq!(
        count(&app.get("/api/v1/drifts?severity=critical").await.1),
        0
    );
    assert_eq!(
        count(&app.get("/api/v1/drifts?namespace=knative-serving").await.1),
        3
    );
    assert_eq!(
        count(&app.get("/api/v1/drifts?namespace=default").await.1),
        0
    );
    assert_eq!(count(&app.get("/api/v1/drifts?cluster=default").await.1), 3);
    assert_eq!(count(&app.get("/api/v1/drifts?cluster=other").await.1), 0);
    assert_eq!(
        count(&app.get("/api/v1/drifts?since=2000-01-01T00:00:00Z").await.1),
        3
    );
    assert_eq!(
        count(&app.get("/api/v1/drifts?since=2999-01-01T00:00:00Z").await.1),
        0
    );
    let first = &all["items"][0];
    assert_eq!(first["class"], "config_drift");
    assert!(
        first["since"].as_str().unwrap().ends_with('Z'),
        "times are RFC 3339"
    );
    // Pages of one, following nextCursor, visit every drift once.
    let mut seen = Vec::new();
    let mut path = "/api/v1/drifts?limit=1".to_string();
    loop {
        let (_, page) = app.get(&path).await;
        for item in page["items"].as_array().unwrap() {
            seen.push(item["id"].as_str().unwrap().to_string());
        }
        match page["nextCursor"].as_str() {
            Some(cursor) => path = format!("/api/v1/drifts?limit=1&cursor={cursor}"),
            None => break,
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 3);
    for bad in [
        "state=done",
        "class=nope",
        "severity=high",
        "since=yesterday",
        "cursor=x",
        "colour=red",
    ] {
        let (status, body) = app.get(&format!("/api/v1/drifts?{bad}")).await;
        assert_eq!(status, 400, "{bad}");
        assert_eq!(body["code"], "invalid_query", "{bad}");
    }
    app.stop().await;
}

#[tokio::test]
async fn drift_detail_has_history_and_deliveries() {
    let mut app = Running::start("").await;
    app.make_drifts().await;
    let (_, resolved) = app.get("/api/v1/drifts?state=resolved").await;
    let id = resolved["items"][0]["id"].as_str().unwrap().to_string();
    assert!(
        eventually(|| async {
            let (_, detail) = app.get(&format!("/api/v1/drifts/{id}")).await;
            detail["deliveries"]
                .as_array()
                .is_some_and(|d| d.len() == 2 && d.iter().all(|d| d["state"] == "delivered"))
        })
        .await,
        "firing and resolved notifications delivered to the log channel: {}",
        app.get(&format!("/api/v1/drifts/{id}")).await.1["deliveries"]
    );
    let (status, detail) = app.get(&format!("/api/v1/drifts/{id}")).await;
    assert_eq!(status, 200);
    let states: Vec<&str> = detail["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["to"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["pending", "firing", "resolved"]);
    assert_eq!(
        detail["history"][1]["evidence"]["actor"]["manager"],
        "kubectl-edit"
    );
    assert_eq!(
        detail["drift"]["evidence"]["changes"][0]["path"],
        "/data/min-scale"
    );
    let delivery = &detail["deliveries"][0];
    assert_eq!(delivery["channel"], "log");
    assert_eq!(delivery["attemptLog"][0]["state"], "delivered");
    let (status, missing) = app.get("/api/v1/drifts/nope").await;
    assert_eq!((status, missing["code"].as_str()), (404, Some("not_found")));
    let (_, delivered) = app.get("/api/v1/deliveries?state=delivered").await;
    assert!(delivered["items"].as_array().unwrap().len() >= 2);
    let (_, rejected) = app.get("/api/v1/deliveries?state=rejected").await;
    assert_eq!(rejected["items"].as_array().unwrap().len(), 0);
    let (_, expired) = app
        .get("/api/v1/deliveries?state=expired&channel=log")
        .await;
    assert_eq!(expired["items"].as_array().unwrap().len(), 0);
    assert_eq!(app.get("/api/v1/deliveries?state=lost").await.0, 400);
    app.stop().await;
}

#[tokio::test]
async fn silences_mute_new_notifications_and_config_silences_are_read_only() {
    let mut app = Running::start(
        "rules:\n  silences:\n    - matchers: {namespace: 'sandbox-*'}\n      comment: sandboxes\n",
    )
    .await;
    let response = app
        .client
        .post(format!("{}/api/v1/silences", app.base))
        .json(&json!({"matchers": {"class": "config_drift", "name": "config-defaults"}, "expiresAt": "2999-01-01T00:00:00Z", "comment": "migration"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let created: Value = response.json().await.unwrap();
    let id = created["id"].as_str().unwrap().to_string();
    let (_, list) = app.get("/api/v1/silences").await;
    let sources: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["config", "api"]);
    // A drift matching the silence is recorded but not sent.
    let mut base = config_autoscaler();
    base["metadata"]["name"] = json!("config-defaults");
    base["metadata"]["uid"] = json!("uid-config-defaults");
    app.send("add", &base).await;
    app.send(
        "update",
        &changed(&base, |c| {
            c["data"]["container-concurrency"] = json!("10");
            written_by(
                c,
                "kubectl-edit",
                "Update",
                json!({"f:data": {"f:container-concurrency": {}}}),
                "2026-11-29T09:00:00Z",
            );
        }),
    )
    .await;
    let (_, firing) = app.get("/api/v1/drifts?state=firing").await;
    let drift_id = firing["items"][0]["id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, detail) = app.get(&format!("/api/v1/drifts/{drift_id}")).await;
    assert_eq!(
        detail["deliveries"].as_array().unwrap().len(),
        0,
        "silenced: nothing queued"
    );
    let delete = |path: String| {
        let client = app.client.clone();
        async move { client.delete(path).send().await.unwrap().status().as_u16() }
    };
    assert_eq!(
        delete(format!("{}/api/v1/silences/config-0", app.base)).await,
        409
    );
    assert_eq!(
        delete(format!("{}/api/v1/silences/{id}", app.base)).await,
        204
    );
    assert_eq!(
        delete(format!("{}/api/v1/silences/{id}", app.base)).await,
        404
    );
    let bad = app
        .client
        .post(format!("{}/api/v1/silences", app.base))
        .json(&json!({"matchers": {}, "expiresAt": "soon"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    app.stop().await;
}

#[tokio::test]
async fn report_in_three_formats() {
    let mut app = Running::start("").await;
    app.make_drifts().await;
    let (status, report) = app.get("/api/v1/report").await;
    assert_eq!(status, 200);
    assert_eq!(report["open"].as_array().unwrap().len(), 2);
    assert_eq!(report["openByClass"]["config_drift"], 2);
    assert_eq!(report["openByNamespace"]["knative-serving"], 2);
    assert_eq!(report["timeToResolve"]["config_drift"]["count"], 1);
    let (_, markdown) = app.text("/api/v1/report?format=markdown").await;
    assert!(markdown.starts_with("# Drift report"));
    assert!(markdown.contains("| warning | firing | config_drift | default | ConfigMap/knative-serving/config-autoscaler |"), "{markdown}");
    let (_, html) = app.text("/api/v1/report?format=html").await;
    assert!(html.contains("<h2>Open drifts</h2>") && html.contains("config-gc"));
    assert_eq!(app.get("/api/v1/report?format=pdf").await.0, 400);
    app.stop().await;
}

#[tokio::test]
async fn token_protects_the_api_and_dashboard_but_not_ingest() {
    let mut app = Running::start("api:\n  token: s3cret-token\n").await;
    app.make_drifts().await;
    assert_eq!(app.get("/api/v1/drifts").await.0, 401);
    let wrong = app
        .client
        .get(format!("{}/api/v1/drifts", app.base))
        .bearer_auth("nope")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let right = app
        .client
        .get(format!("{}/api/v1/drifts", app.base))
        .bearer_auth("s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);
    assert_eq!(app.text("/ui").await.0, 401);
    let login = app
        .client
        .get(format!("{}/ui?token=s3cret-token", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 303);
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    let page = app
        .client
        .get(format!("{}/ui", app.base))
        .header("cookie", cookie.split(';').next().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("config-autoscaler"));
    app.stop().await;
}

#[tokio::test]
async fn dashboard_lists_details_and_silences_a_drift() {
    let mut app = Running::start("").await;
    app.make_drifts().await;
    let (status, index) = app.text("/ui").await;
    assert_eq!(status, 200);
    assert!(index.contains("ConfigMap knative-serving/config-autoscaler"));
    // The class filter names each class of the registry in English; its value is the id.
    assert!(
        index.contains(r#"<option value="traffic_drift">Traffic drift</option>"#),
        "{index}"
    );
    assert!(
        !index.contains("config-network"),
        "the resolved drift is not in the open list"
    );
    let (_, resolved) = app.text("/ui?state=resolved").await;
    assert!(resolved.contains("config-network"));
    let (_, firing) = app.get("/api/v1/drifts?state=firing").await;
    let id = firing["items"][0]["id"].as_str().unwrap().to_string();
    let (status, detail) = app.text(&format!("/ui/drifts/{id}")).await;
    assert_eq!(status, 200);
    assert!(detail.contains("<code>/data/min-scale</code>"));
    assert!(detail.contains("kubectl-edit (Update)"));
    assert!(detail.contains("kubectl -n knative-serving patch configmaps"));
    let drift_name = firing["items"][0]["name"].as_str().unwrap().to_string();
    let pending_reminders = |deliveries: &Value| {
        deliveries["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|row| row["driftId"] == id.as_str() && row["kind"] == "repeat")
            .count()
    };
    assert!(
        eventually(|| async {
            pending_reminders(&app.get("/api/v1/deliveries?state=pending").await.1) == 1
        })
        .await,
        "a reminder is queued after the firing notice"
    );
    let response = app
        .client
        .post(format!("{}/ui/silences", app.base))
        .form(&[
            ("drift", id.as_str()),
            ("class", "config_drift"),
            ("cluster", "default"),
            ("namespace", "knative-serving"),
            ("name", drift_name.as_str()),
            ("duration", "4h"),
            ("comment", ""),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    let (_, silences) = app.get("/api/v1/silences").await;
    assert_eq!(
        silences["items"][0]["matchers"]["name"],
        drift_name.as_str()
    );
    assert_eq!(
        pending_reminders(&app.get("/api/v1/deliveries?state=pending").await.1),
        0,
        "silencing withdraws the reminder"
    );
    assert_eq!(app.text("/ui/drifts/nope").await.0, 404);
    app.stop().await;
}

/// The id and name of one firing drift.
async fn firing_drift(app: &Running) -> (String, String) {
    let (_, firing) = app.get("/api/v1/drifts?state=firing").await;
    (
        firing["items"][0]["id"].as_str().unwrap().to_string(),
        firing["items"][0]["name"].as_str().unwrap().to_string(),
    )
}

impl Running {
    /// Posts the dashboard's silence form with `headers`; the status.
    async fn post_silence_form(&self, form: &[(&str, &str)], headers: &[(&str, &str)]) -> u16 {
        let mut request = self
            .client
            .post(format!("{}/ui/silences", self.base))
            .form(form);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.unwrap().status().as_u16()
    }

    async fn silences(&self, token: Option<&str>) -> Vec<Value> {
        let mut request = self.client.get(format!("{}/api/v1/silences", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let list: Value = request.send().await.unwrap().json().await.unwrap();
        list["items"].as_array().unwrap().clone()
    }
}

#[tokio::test]
async fn a_cross_site_silence_form_is_refused_and_silences_nothing() {
    let mut app = Running::start("").await;
    app.make_drifts().await;
    let (id, name) = firing_drift(&app).await;
    // The form as the dashboard used to render it, which an attacker can copy.
    let form = [
        ("drift", id.as_str()),
        ("class", "config_drift"),
        ("cluster", "default"),
        ("namespace", "knative-serving"),
        ("name", name.as_str()),
        ("duration", "4h"),
    ];
    // A page on another site posts the form to the dashboard; the victim's browser says where
    // the request comes from in Sec-Fetch-Site (current browsers) and Origin (all of them).
    for headers in [
        vec![
            ("origin", "https://evil.example"),
            ("sec-fetch-site", "cross-site"),
        ],
        vec![("origin", "https://evil.example")],
        vec![("origin", "null")],
        vec![
            ("origin", "http://127.0.0.1:1"),
            ("sec-fetch-site", "same-site"),
        ],
        vec![("sec-fetch-site", "cross-site")],
    ] {
        assert_eq!(
            app.post_silence_form(&form, &headers).await,
            403,
            "{headers:?}"
        );
    }
    // The JSON API refuses a browser's cross-site write too.
    let api = app
        .client
        .post(format!("{}/api/v1/silences", app.base))
        .header("sec-fetch-site", "cross-site")
        .json(&json!({"matchers": {"class": "image_drift"}, "expiresAt": "2999-01-01T00:00:00Z"}))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 403);
    let body: Value = api.json().await.unwrap();
    assert_eq!(body["code"], "cross_origin");
    assert_eq!(
        app.silences(None).await,
        Vec::<Value>::new(),
        "nothing silenced"
    );
    // The dashboard's own page posts same-origin; a client that is not a browser sends neither
    // header.
    let origin = app.base.clone();
    let same_origin = [
        ("origin", origin.as_str()),
        ("sec-fetch-site", "same-origin"),
    ];
    assert_eq!(app.post_silence_form(&form, &same_origin).await, 303);
    assert_eq!(
        app.post_silence_form(&form, &[("origin", origin.as_str())])
            .await,
        303
    );
    assert_eq!(app.post_silence_form(&form, &[]).await, 303);
    assert_eq!(app.silences(None).await.len(), 3);
    app.stop().await;
}

#[tokio::test]
async fn with_a_token_a_foreign_origin_carrying_the_cookie_is_refused() {
    let mut app = Running::start("api:\n  token: s3cret-token\n").await;
    app.make_drifts().await;
    let login = app
        .client
        .get(format!("{}/ui?token=s3cret-token", app.base))
        .send()
        .await
        .unwrap();
    let cookie = login.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let (_, firing) = {
        let response = app
            .client
            .get(format!("{}/api/v1/drifts?state=firing", app.base))
            .bearer_auth("s3cret-token")
            .send()
            .await
            .unwrap();
        (200, response.json::<Value>().await.unwrap())
    };
    let id = firing["items"][0]["id"].as_str().unwrap().to_string();
    let name = firing["items"][0]["name"].as_str().unwrap().to_string();
    let form = [
        ("drift", id.as_str()),
        ("class", "config_drift"),
        ("cluster", "default"),
        ("namespace", "knative-serving"),
        ("name", name.as_str()),
        ("duration", "4h"),
    ];
    let foreign = [
        ("cookie", cookie.as_str()),
        ("origin", "https://evil.example"),
    ];
    assert_eq!(app.post_silence_form(&form, &foreign).await, 403);
    let foreign = [
        ("cookie", cookie.as_str()),
        ("origin", "https://evil.example"),
        ("sec-fetch-site", "cross-site"),
    ];
    assert_eq!(app.post_silence_form(&form, &foreign).await, 403);
    assert_eq!(app.silences(Some("s3cret-token")).await.len(), 0);
    let origin = app.base.clone();
    let own = [
        ("cookie", cookie.as_str()),
        ("origin", origin.as_str()),
        ("sec-fetch-site", "same-origin"),
    ];
    assert_eq!(app.post_silence_form(&form, &own).await, 303);
    assert_eq!(app.silences(Some("s3cret-token")).await.len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn the_silence_form_silences_only_its_drift_for_one_of_its_durations() {
    let mut app = Running::start("").await;
    app.make_drifts().await;
    let (id, name) = firing_drift(&app).await;
    // The old form's hidden fields, forged to silence everything everywhere: they are ignored,
    // and the matchers come from the stored drift.
    let forged = [
        ("drift", id.as_str()),
        ("class", ""),
        ("cluster", "*"),
        ("namespace", "*"),
        ("kind", "*"),
        ("name", "*"),
        ("duration", "4h"),
        ("comment", "widened"),
    ];
    assert_eq!(app.post_silence_form(&forged, &[]).await, 303);
    let silences = app.silences(None).await;
    assert_eq!(silences.len(), 1);
    assert_eq!(
        silences[0]["matchers"],
        json!({"class": "config_drift", "cluster": "default", "namespace": "knative-serving", "kind": "ConfigMap", "name": name})
    );
    let expires =
        chrono::DateTime::parse_from_rfc3339(silences[0]["expiresAt"].as_str().unwrap()).unwrap();
    let hours = (expires.timestamp() - chrono::Utc::now().timestamp()) as f64 / 3600.0;
    assert!((3.9..=4.0).contains(&hours), "{hours}");
    // Only the form's durations: not a century, not a second, not garbage.
    for duration in ["876000h", "100y", "36500d", "1s", "", "4h "] {
        let status = app
            .post_silence_form(&[("drift", id.as_str()), ("duration", duration)], &[])
            .await;
        assert_eq!(status, 400, "{duration:?}");
    }
    for duration in ["1h", "24h", "7d"] {
        assert_eq!(
            app.post_silence_form(&[("drift", id.as_str()), ("duration", duration)], &[])
                .await,
            303
        );
    }
    // A drift that does not exist silences nothing.
    assert_eq!(
        app.post_silence_form(&[("drift", "nope"), ("duration", "4h")], &[])
            .await,
        404
    );
    assert_eq!(app.silences(None).await.len(), 4);
    app.stop().await;
}

#[tokio::test]
async fn api_and_dashboard_answers_forbid_framing_and_sniffing() {
    let mut app = Running::start("api:\n  token: s3cret-token\n").await;
    app.make_drifts().await;
    let (id, _) = {
        let response = app
            .client
            .get(format!("{}/api/v1/drifts?state=firing", app.base))
            .bearer_auth("s3cret-token")
            .send()
            .await
            .unwrap();
        let list: Value = response.json().await.unwrap();
        (list["items"][0]["id"].as_str().unwrap().to_string(), ())
    };
    for (path, status) in [
        ("/ui".to_string(), 200),
        (format!("/ui/drifts/{id}"), 200),
        ("/ui/drifts/nope".to_string(), 404),
        ("/ui/report".to_string(), 200),
        ("/api/v1/drifts".to_string(), 200),
        ("/api/v1/drifts/nope".to_string(), 404),
        ("/api/v1/report?format=html".to_string(), 200),
        ("/api/v1/report?format=markdown".to_string(), 200),
    ] {
        for authorized in [true, false] {
            let mut request = app.client.get(format!("{}{path}", app.base));
            if authorized {
                request = request.bearer_auth("s3cret-token");
            }
            let response = request.send().await.unwrap();
            let expected = if authorized { status } else { 401 };
            assert_eq!(response.status().as_u16(), expected, "{path}");
            let headers = response.headers();
            assert_eq!(headers["x-frame-options"], "DENY", "{path}");
            assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
            let policy = headers["content-security-policy"].to_str().unwrap();
            assert!(
                policy.contains("frame-ancestors 'none'"),
                "{path}: {policy}"
            );
        }
    }
    app.stop().await;
}

#[tokio::test]
async fn the_dashboard_cookie_is_secure_when_served_over_https() {
    let login = |app: &Running, forwarded: Option<&'static str>| {
        let mut request = app
            .client
            .get(format!("{}/ui?token=s3cret-token", app.base));
        if let Some(proto) = forwarded {
            request = request.header("x-forwarded-proto", proto);
        }
        async move {
            let response = request.send().await.unwrap();
            response.headers()["set-cookie"]
                .to_str()
                .unwrap()
                .to_string()
        }
    };
    let app = Running::start("api:\n  token: s3cret-token\n").await;
    let plain = login(&app, None).await;
    assert!(!plain.contains("Secure"), "{plain}");
    let proxied = login(&app, Some("https")).await;
    assert!(
        proxied.contains("; Secure") && proxied.contains("HttpOnly"),
        "{proxied}"
    );
    app.stop().await;
    let app =
        Running::start("api:\n  token: s3cret-token\npublicUrl: https://drift.example.com\n").await;
    let public = login(&app, None).await;
    assert!(public.contains("; Secure"), "{public}");
    app.stop().await;
}

#[tokio::test]
async fn a_silence_that_has_already_expired_is_refused() {
    let app = Running::start("").await;
    for expires in ["2020-01-01T00:00:00Z", "1970-01-01T00:00:00+08:00"] {
        let response = app
            .client
            .post(format!("{}/api/v1/silences", app.base))
            .json(&json!({"matchers": {"class": "config_drift"}, "expiresAt": expires}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{expires}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], "invalid_silence");
        assert!(
            body["message"].as_str().unwrap().contains("expiresAt"),
            "{body}"
        );
    }
    assert_eq!(app.silences(None).await, Vec::<Value>::new());
    app.stop().await;
}

#[tokio::test]
async fn an_unknown_query_parameter_is_a_json_400_like_every_query_error() {
    let mut app = Running::start("").await;
    app.make_drifts().await;
    let (id, _) = firing_drift(&app).await;
    for (method, path) in [
        ("GET", "/api/v1/drifts?bogus=1".to_string()),
        ("GET", format!("/api/v1/drifts/{id}?bogus=1")),
        ("GET", "/api/v1/deliveries?bogus=1".to_string()),
        ("GET", "/api/v1/silences?bogus=1".to_string()),
        ("POST", "/api/v1/silences?bogus=1".to_string()),
        ("DELETE", "/api/v1/silences/nope?bogus=1".to_string()),
        ("GET", "/api/v1/report?bogus=1".to_string()),
        ("GET", "/api/v1/drifts?limit=many".to_string()),
    ] {
        let request = match method {
            "POST" => app
                .client
                .post(format!("{}{path}", app.base))
                .json(&json!({"matchers": {"class": "config_drift"}})),
            "DELETE" => app.client.delete(format!("{}{path}", app.base)),
            _ => app.client.get(format!("{}{path}", app.base)),
        };
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 400, "{method} {path}");
        assert_eq!(
            response.headers()["content-type"],
            "application/json",
            "{method} {path}"
        );
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], "invalid_query", "{method} {path}: {body}");
    }
    assert_eq!(app.silences(None).await, Vec::<Value>::new());
    app.stop().await;
}

#[tokio::test]
async fn the_dashboard_answers_a_bad_filter_with_its_own_page_and_never_echoes_it() {
    let mut app = Running::start("").await;
    app.make_drifts().await;
    let (id, _) = firing_drift(&app).await;
    for path in [
        "/ui?state=%3Cscript%3Ealert(1)%3C%2Fscript%3E".to_string(),
        "/ui?class=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E".to_string(),
        "/ui?severity=%3Cb%3Ealert(1)".to_string(),
        "/ui?limit=%3Cscript%3Ealert(1)".to_string(),
        "/ui?%3Cscript%3Ealert(1)%3C%2Fscript%3E=1".to_string(),
        format!("/ui/drifts/{id}?%3Cscript%3Ealert(1)=1"),
        "/ui/report?%3Cscript%3Ealert(1)=1".to_string(),
    ] {
        let response = app
            .client
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{path}");
        assert_eq!(
            response.headers()["content-type"],
            "text/html; charset=utf-8",
            "{path}"
        );
        let page = response.text().await.unwrap();
        assert!(!page.contains("alert(1)"), "{path}: {page}");
        assert!(
            page.contains("drift-sentinel"),
            "the dashboard's own page: {page}"
        );
        assert!(
            !page.contains("http-equiv"),
            "an error page does not reload itself: {page}"
        );
    }
    // Filters the dashboard offers still work, and an empty one means any.
    let (status, page) = app
        .text("/ui?state=firing&class=config_drift&severity=")
        .await;
    assert_eq!(status, 200);
    assert!(page.contains("config-autoscaler"), "{page}");
    app.stop().await;
}

#[tokio::test]
async fn oversized_silence_bodies_are_a_413() {
    // Found in review: the handlers turned the body-limit rejection into a 400.
    let app = Running::start("").await;
    let huge = "x".repeat(3 * 1024 * 1024);
    let response = app
        .client
        .post(format!("{}/api/v1/silences", app.base))
        .json(&json!({"matchers": {"class": "config_drift"}, "expiresAt": "2999-01-01T00:00:00Z", "comment": huge}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], "body_too_large");
    let response = app
        .client
        .post(format!("{}/ui/silences", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("drift=d1&duration=1h&comment={huge}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    // The dashboard answers with its own page.
    let page = response.text().await.unwrap();
    assert!(page.contains("larger than this server takes"), "{page}");
    app.stop().await;
}

/// The Trigger of `tests/fixtures/knative/eventing/` (a real object, `eventing.knative.dev`).
fn trigger() -> Value {
    let list =
        fixture_yaml("eventing/redhat-developer-vscode-knative__test-eventingTree-trigger.json");
    list["items"][0].clone()
}

impl Running {
    /// [`Running::make_drifts`] (three ConfigMaps of the core group, two firing), and a hand edit
    /// of a Trigger (Eventing) and of a Configuration (Serving): both `manual_edit`, firing.
    async fn make_drifts_of_three_groups(&mut self) {
        self.make_drifts().await;
        let trigger = trigger();
        self.send("add", &trigger).await;
        let edited = changed(&trigger, |t| {
            t["spec"]["subscriber"]["ref"]["name"] = json!("payments-v2");
            written_by(
                t,
                "kubectl-edit",
                "Update",
                json!({"f:spec": {"f:subscriber": {"f:ref": {"f:name": {}}}}}),
                "2026-11-29T09:00:00Z",
            );
        });
        self.send("update", &edited).await;
        let configuration = configuration();
        self.send("add", &configuration).await;
        let edited = changed(&configuration, |c| {
            c["spec"]["template"]["spec"]["containerConcurrency"] = json!(7);
            written_by(
                c,
                "kubectl-edit",
                "Update",
                json!({"f:spec": {"f:template": {"f:spec": {"f:containerConcurrency": {}}}}}),
                "2026-11-29T09:00:00Z",
            );
        });
        self.send("update", &edited).await;
    }
}

#[tokio::test]
async fn drifts_filter_by_api_group_family_or_group() {
    let mut app = Running::start("").await;
    app.make_drifts_of_three_groups().await;
    let names = |value: &Value| {
        let mut names: Vec<String> = value["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| {
                format!(
                    "{}/{}",
                    item["kind"].as_str().unwrap(),
                    item["name"].as_str().unwrap()
                )
            })
            .collect();
        names.sort();
        names
    };
    let (status, all) = app.get("/api/v1/drifts").await;
    assert_eq!(status, 200);
    assert_eq!(all["items"].as_array().unwrap().len(), 5, "{all}");
    for (query, expected) in [
        ("group=eventing", vec!["Trigger/example-trigger0"]),
        ("group=Eventing", vec!["Trigger/example-trigger0"]),
        (
            "group=eventing.knative.dev",
            vec!["Trigger/example-trigger0"],
        ),
        ("group=messaging.knative.dev", vec![]),
        ("group=serving", vec!["Configuration/knative-webapp"]),
        (
            "group=serving.knative.dev&state=firing",
            vec!["Configuration/knative-webapp"],
        ),
        (
            "group=kubernetes",
            vec![
                "ConfigMap/config-autoscaler",
                "ConfigMap/config-gc",
                "ConfigMap/config-network",
            ],
        ),
        (
            "group=core&state=firing",
            vec!["ConfigMap/config-autoscaler", "ConfigMap/config-gc"],
        ),
        ("group=apps", vec![]),
        ("group=networking", vec![]),
        ("group=operator", vec![]),
        (
            "group=eventing&namespace=josh&class=manual_edit",
            vec!["Trigger/example-trigger0"],
        ),
        ("group=eventing&namespace=knative-serving", vec![]),
    ] {
        let (status, page) = app.get(&format!("/api/v1/drifts?{query}")).await;
        assert_eq!(status, 200, "{query}");
        assert_eq!(names(&page), expected, "{query}");
    }
    // Pages within a family follow the cursor.
    let (_, first) = app.get("/api/v1/drifts?group=kubernetes&limit=2").await;
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    let cursor = first["nextCursor"].as_str().unwrap().to_string();
    let (_, second) = app
        .get(&format!(
            "/api/v1/drifts?group=kubernetes&limit=2&cursor={cursor}"
        ))
        .await;
    assert_eq!(second["items"].as_array().unwrap().len(), 1);
    assert_eq!(second["nextCursor"], Value::Null);
    for bad in [
        "knative",
        "batch",
        "",
        "serving.knative.dev%2Fv1",
        "%3Cscript%3E",
    ] {
        let (status, body) = app.get(&format!("/api/v1/drifts?group={bad}")).await;
        assert_eq!(status, 400, "{bad}");
        assert_eq!(body["code"], "invalid_query", "{bad}");
        let message = body["message"].as_str().unwrap();
        assert!(message.starts_with("group: "), "{message}");
        assert!(
            message.contains("serving, eventing, networking, operator, kubernetes, serving.knative.dev, eventing.knative.dev, messaging.knative.dev")
                && message.contains("operator.knative.dev, core, apps"),
            "{message}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn the_report_and_the_dashboard_take_the_group_filter() {
    let mut app = Running::start("").await;
    app.make_drifts_of_three_groups().await;
    let (status, report) = app.get("/api/v1/report").await;
    assert_eq!(status, 200);
    assert_eq!(report["group"], Value::Null);
    assert_eq!(report["open"].as_array().unwrap().len(), 4);
    assert_eq!(
        report["openByGroup"],
        json!({"Eventing": 1, "Kubernetes": 2, "Serving": 1})
    );
    let (status, eventing) = app.get("/api/v1/report?group=eventing").await;
    assert_eq!(status, 200);
    assert_eq!(eventing["group"]["filter"], "eventing");
    assert_eq!(eventing["group"]["groups"][4], "sinks.knative.dev");
    assert_eq!(eventing["open"].as_array().unwrap().len(), 1);
    assert_eq!(
        eventing["open"][0]["object"],
        "Trigger/josh/example-trigger0"
    );
    assert_eq!(eventing["openByGroup"], json!({"Eventing": 1}));
    assert_eq!(eventing["openByNamespace"], json!({"josh": 1}));
    assert_eq!(eventing["timeToResolve"], json!({}));
    let (_, kubernetes) = app.get("/api/v1/report?group=core").await;
    assert_eq!(kubernetes["timeToResolve"]["config_drift"]["count"], 1);
    assert_eq!(kubernetes["group"]["groups"], json!(["core"]));
    let (_, markdown) = app
        .text("/api/v1/report?format=markdown&group=eventing")
        .await;
    assert!(
        markdown.contains("API group eventing: eventing.knative.dev, messaging.knative.dev, flows.knative.dev, sources.knative.dev, sinks.knative.dev. 1 open drift(s)."),
        "{markdown}"
    );
    assert!(
        markdown.contains(
            "## Open drifts by API group\n\n| API group | Open |\n|---|---|\n| Eventing | 1 |"
        ),
        "{markdown}"
    );
    assert!(!markdown.contains("config-autoscaler"), "{markdown}");
    let (_, html) = app.text("/api/v1/report?format=html&group=serving").await;
    assert!(
        html.contains("API group serving: serving.knative.dev."),
        "{html}"
    );
    assert!(
        html.contains("<tr><td>Serving</td><td>1</td></tr>") && html.contains("knative-webapp")
    );
    assert!(!html.contains("example-trigger0"));
    let (status, body) = app.get("/api/v1/report?group=knative").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_query"))
    );
    assert!(body["message"].as_str().unwrap().starts_with("group: "));

    // The dashboard: the list filtered, the select offering families and groups, a report of
    // the group, and a bad group answered with the dashboard's own page, never echoed.
    let (status, page) = app.text("/ui?group=eventing").await;
    assert_eq!(status, 200);
    assert!(page.contains("Trigger josh/example-trigger0"), "{page}");
    assert!(!page.contains("config-autoscaler") && !page.contains("knative-webapp"));
    assert!(
        page.contains(r#"<option value="eventing" selected>Eventing</option>"#),
        "{page}"
    );
    assert!(page.contains(r#"<option value="networking.internal.knative.dev">networking.internal.knative.dev</option>"#));
    assert!(page.contains(r#"<option value="core">core</option>"#));
    assert!(
        page.contains(r#"<a href="/ui/report?group=eventing">report of these API groups</a>"#),
        "{page}"
    );
    assert!(
        page.contains(r#"<td title="eventing.knative.dev">Eventing</td>"#),
        "{page}"
    );
    let (_, all) = app.text("/ui?group=").await;
    assert!(all.contains("config-autoscaler") && all.contains("example-trigger0"));
    let (status, report_page) = app.text("/ui/report?group=eventing").await;
    assert_eq!(status, 200);
    assert!(report_page.contains("example-trigger0") && !report_page.contains("config-gc"));
    for path in [
        "/ui?group=%3Cscript%3Ealert(1)",
        "/ui/report?group=%3Cscript%3Ealert(1)",
    ] {
        let (status, page) = app.text(path).await;
        assert_eq!(status, 400, "{path}");
        assert!(!page.contains("alert(1)"), "{page}");
        assert!(
            page.contains(
                "group must be an API group family or one of its groups: serving, eventing"
            ),
            "{page}"
        );
    }
    app.stop().await;
}

/// The numbers after `marker` up to the next `<` (the text of an element).
fn text_after<'a>(page: &'a str, marker: &str) -> &'a str {
    let start = page
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} in {page}"))
        + marker.len();
    page[start..].split('<').next().unwrap()
}

#[tokio::test]
async fn the_front_page_opens_with_an_overview_of_what_fires() {
    let mut app = Running::start("").await;
    app.make_drifts_of_three_groups().await;
    let (status, page) = app.text("/ui").await;
    assert_eq!(status, 200);
    // The overview comes first, the list after it.
    let overview = page.find("id=\"overview\"").unwrap();
    assert!(overview < page.find("<table id=\"drifts\"").unwrap());
    assert!(page.contains("4 drift(s) firing now"), "{page}");
    // Severity tiles: as many as the API lists firing with each severity.
    let (_, firing) = app.get("/api/v1/drifts?state=firing").await;
    let firing = firing["items"].as_array().unwrap().clone();
    assert_eq!(firing.len(), 4);
    for severity in ["critical", "warning", "info"] {
        let expected = firing
            .iter()
            .filter(|drift| drift["severity"] == severity)
            .count();
        let tile = format!(
            "id=\"tile-{severity}\" href=\"/ui?state=firing&amp;severity={severity}\"><span class=\"n\">"
        );
        assert_eq!(text_after(&page, &tile), expected.to_string(), "{severity}");
        assert_eq!(
            page.contains(&format!("class=\"tile tile-{severity} zero\"")),
            expected == 0,
            "{severity}"
        );
    }
    // Families, each linked to its filtered list.
    for (family, id, count) in [
        ("Serving", "serving", "1"),
        ("Eventing", "eventing", "1"),
        ("Networking", "networking", "0"),
        ("Operator", "operator", "0"),
        ("Kubernetes", "kubernetes", "2"),
    ] {
        let row = format!(
            "<a href=\"/ui?state=firing&amp;group={id}\">{family}</a></th><td class=\"n\">"
        );
        assert_eq!(text_after(&page, &row), count, "{family}");
    }
    for (namespace, count) in [("knative-serving", "2"), ("josh", "1"), ("myapp", "1")] {
        let row = format!("<a href=\"/ui?state=firing&amp;namespace={namespace}\">{namespace}</a></th><td class=\"n\">");
        assert_eq!(text_after(&page, &row), count, "{namespace}");
    }
    // The chart: an inline SVG whose totals are the store's (five fired, one resolved, all
    // within the last two days whatever the hour).
    assert!(page.contains("<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"moves-chart\""));
    assert_eq!(text_after(&page, "<text x=\"56\" y=\"18\">"), "fired (5)");
    assert_eq!(
        text_after(&page, "<text x=\"166\" y=\"18\">"),
        "resolved (1)"
    );
    assert!(page.contains(": 5 fired and 1 resolved."), "{page}");
    let bars: u64 = page
        .split("<rect class=\"fired\" data-count=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(bars, 5);
    assert_eq!(page.matches("<rect class=\"resolved\"").count(), 14);
    app.stop().await;
}

/// A drift on a fixed clock, for the memory-backed API.
fn seeded_drift(
    id: &str,
    api_version: &str,
    namespace: &str,
    severity: drift_model::Severity,
    fired_at: Option<i64>,
    resolved_at: Option<i64>,
) -> drift_model::Drift {
    use drift_model::{Drift, DriftState, Evidence, OwnerChain};
    let since = fired_at.unwrap_or(0) - 60_000;
    Drift {
        id: id.into(),
        class: "not_ready".into(),
        rule: None,
        severity,
        state: match (fired_at, resolved_at) {
            (_, Some(_)) => DriftState::Resolved,
            (Some(_), None) => DriftState::Firing,
            _ => DriftState::Pending,
        },
        cluster: "prod".into(),
        uid: format!("uid-{id}"),
        api_version: api_version.into(),
        kind: "Thing".into(),
        namespace: namespace.into(),
        name: id.into(),
        labels: Default::default(),
        owner: OwnerChain::default(),
        evidence: Evidence {
            summary: format!("{id} is not ready"),
            ..Evidence::default()
        },
        since,
        fire_at: since,
        fired_at,
        resolved_at,
        resolution: resolved_at.map(|_| "cleared".into()),
    }
}

/// Commits `drifts` and their moves (opened, fired, resolved) to the test store.
fn seed(store: &drift_store::testing::TestStore, drifts: Vec<drift_model::Drift>) {
    use drift_model::{DriftState, Transition};
    use drift_store::Store;
    let mut history = Vec::new();
    for drift in &drifts {
        let mut moved = drift.clone();
        moved.state = DriftState::Pending;
        history.push(Transition {
            drift: moved.clone(),
            from: None,
            at: drift.since,
        });
        if let Some(at) = drift.fired_at {
            moved.state = DriftState::Firing;
            history.push(Transition {
                drift: moved.clone(),
                from: Some(DriftState::Pending),
                at,
            });
        }
        if let Some(at) = drift.resolved_at {
            moved.state = DriftState::Resolved;
            history.push(Transition {
                drift: moved.clone(),
                from: Some(DriftState::Firing),
                at,
            });
        }
    }
    store
        .clone()
        .commit(&drift_store::Batch {
            drifts,
            history,
            ..Default::default()
        })
        .unwrap();
}

async fn page_of(router: &axum::Router, path: &str) -> (u16, String) {
    use tower::ServiceExt;
    let response = router
        .clone()
        .oneshot(
            axum::http::Request::get(path)
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = crate::support::body_bytes(response).await;
    (status, String::from_utf8(body).unwrap())
}

#[tokio::test]
async fn the_overview_chart_counts_days_by_the_injected_clock() {
    use drift_model::Severity;
    // 2026-11-29T10:00:05Z: the chart's days run from 2026-11-16 to 2026-11-29 (UTC).
    let now = 1_795_946_405_000_i64;
    let day = 24 * 3600 * 1000;
    let app = crate::support::app_with_audit(std::sync::Arc::new(move || now));
    seed(
        &app.store,
        vec![
            // Fired 20 days ago: outside the chart, still firing (counted in the tiles).
            seeded_drift(
                "old",
                "serving.knative.dev/v1",
                "shop",
                Severity::Critical,
                Some(now - 20 * day),
                None,
            ),
            // Fired on the 16th (the first day), resolved on the 20th.
            seeded_drift(
                "broker",
                "eventing.knative.dev/v1",
                "<b>evil</b>",
                Severity::Critical,
                Some(now - 13 * day - 9 * 3_600_000),
                Some(now - 9 * day),
            ),
            // Fired on the 20th, and three today (one of them resolved today).
            seeded_drift(
                "kingress",
                "networking.internal.knative.dev/v1alpha1",
                "shop",
                Severity::Warning,
                Some(now - 9 * day),
                None,
            ),
            seeded_drift(
                "pa",
                "autoscaling.internal.knative.dev/v1alpha1",
                "shop",
                Severity::Info,
                Some(now - 1000),
                None,
            ),
            seeded_drift(
                "operator",
                "operator.knative.dev/v1beta1",
                "knative-serving",
                Severity::Warning,
                Some(now - 2000),
                None,
            ),
            // Fired and resolved today.
            seeded_drift(
                "cm",
                "v1",
                "knative-serving",
                Severity::Warning,
                Some(now - 5000),
                Some(now - 100),
            ),
        ],
    );
    let (status, page) = page_of(&app.router, "/ui").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("From 2026-11-16 to 2026-11-29: 5 fired and 2 resolved. Fired per day, oldest first: 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 3. Resolved per day: 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1."), "{page}");
    let day_group = |date: &str| {
        let start = page
            .find(&format!("<g class=\"day\" data-day=\"{date}\">"))
            .unwrap();
        page[start..].split("</g>").next().unwrap().to_string()
    };
    let first = day_group("2026-11-16");
    assert!(
        first.contains("<rect class=\"fired\" data-count=\"1\""),
        "{first}"
    );
    assert!(first.contains("<title>2026-11-16: 1 fired</title>"));
    assert!(first.contains(">11-16</text>"));
    let today = day_group("2026-11-29");
    assert!(
        today.contains("<rect class=\"fired\" data-count=\"3\""),
        "{today}"
    );
    assert!(
        today.contains("<rect class=\"resolved\" data-count=\"1\""),
        "{today}"
    );
    assert!(today.contains("<text class=\"count fired\"") && today.contains(">3</text>"));
    assert!(!page.contains("data-day=\"2026-11-15\"") && !page.contains("data-day=\"2026-11-30\""));
    // Tiles and bars: what fires now, whenever it fired.
    assert!(page.contains("4 drift(s) firing now"), "{page}");
    assert_eq!(text_after(&page, "id=\"tile-critical\" href=\"/ui?state=firing&amp;severity=critical\"><span class=\"n\">"), "1");
    assert_eq!(
        text_after(
            &page,
            "id=\"tile-warning\" href=\"/ui?state=firing&amp;severity=warning\"><span class=\"n\">"
        ),
        "2"
    );
    assert_eq!(
        text_after(
            &page,
            "id=\"tile-info\" href=\"/ui?state=firing&amp;severity=info\"><span class=\"n\">"
        ),
        "1"
    );
    assert_eq!(
        text_after(
            &page,
            "<a href=\"/ui?state=firing&amp;group=networking\">Networking</a></th><td class=\"n\">"
        ),
        "2"
    );
    assert_eq!(
        text_after(
            &page,
            "<a href=\"/ui?state=firing&amp;namespace=shop\">shop</a></th><td class=\"n\">"
        ),
        "3"
    );
    // The resolved Broker's namespace is not firing, and a namespace is escaped wherever shown.
    assert!(!page.contains("<b>evil</b>"));
    let (_, resolved) = page_of(&app.router, "/ui?state=resolved").await;
    assert!(
        resolved.contains("&lt;b&gt;evil&lt;/b&gt;") && !resolved.contains("<b>evil</b>"),
        "{resolved}"
    );
}

#[tokio::test]
async fn the_drift_page_shows_the_failing_condition_chain_escaped() {
    use drift_model::Severity;
    let now = 1_795_946_405_000_i64;
    let app = crate::support::app_with_audit(std::sync::Arc::new(move || now));
    let hostile = "<script>alert(1)</script><img src=x onerror=alert(2)> & \"quoted\"";
    let chain = json!([
        {"kind": "Service", "namespace": "shop", "name": "web", "condition": "Ready", "status": "False", "reason": "RevisionMissing", "message": "Configuration \"web\" does not have any ready Revision."},
        {"kind": "Route", "namespace": "shop", "name": "web", "condition": "IngressReady", "status": "False", "reason": "IngressNotConfigured", "message": "Ingress has not yet been reconciled."},
        {"kind": "Ingress", "namespace": "shop", "name": "web", "condition": "CertificateProvisioned", "status": "Unknown", "reason": "CertificateNotReady"},
        {"kind": "Certificate", "namespace": "shop", "name": "route-1234", "condition": "Ready", "status": "False", "reason": "<i>Failed</i>", "message": hostile},
    ]);
    let mut with_chain = seeded_drift(
        "svc",
        "serving.knative.dev/v1",
        "shop",
        Severity::Critical,
        Some(now - 1000),
        None,
    );
    with_chain
        .evidence
        .facts
        .insert(drift_model::CONDITION_CHAIN_FACT.into(), chain.to_string());
    let mut broken = seeded_drift(
        "trigger",
        "eventing.knative.dev/v1",
        "payments",
        Severity::Critical,
        Some(now - 1000),
        None,
    );
    broken.evidence.facts.insert(
        drift_model::CONDITION_CHAIN_FACT.into(),
        "not json <script>".into(),
    );
    let plain = seeded_drift(
        "plain",
        "v1",
        "default",
        Severity::Warning,
        Some(now - 1000),
        None,
    );
    seed(&app.store, vec![with_chain, broken, plain]);

    let (status, page) = page_of(&app.router, "/ui/drifts/svc").await;
    assert_eq!(status, 200, "{page}");
    let start = page
        .find("<ol class=\"chain\" id=\"condition-chain\">")
        .expect("a chain");
    let list = page[start..].split("</ol>").next().unwrap();
    let items: Vec<&str> = list.split("<li>").skip(1).collect();
    assert_eq!(items.len(), 4, "{list}");
    assert!(items[0].starts_with("<strong>Service</strong> shop/web: <code>Ready=False</code> <em>RevisionMissing</em> <span class=\"muted\">— Configuration &quot;web&quot; does not have any ready Revision.</span>"), "{}", items[0]);
    assert!(
        items[1].starts_with("<strong>Route</strong> shop/web: <code>IngressReady=False</code>")
    );
    assert!(items[2].starts_with("<strong>Ingress</strong> shop/web: <code>CertificateProvisioned=Unknown</code> <em>CertificateNotReady</em></li>"), "{}", items[2]);
    assert!(items[3].contains("<strong>Certificate</strong> shop/route-1234"));
    assert!(items[3].contains("<em>&lt;i&gt;Failed&lt;/i&gt;</em>"));
    assert!(items[3].contains("&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt; &amp; &quot;quoted&quot;"), "{}", items[3]);
    assert!(!page.contains("<script") && !page.contains("<img") && !page.contains("<i>"));
    // The chain sits between the facts table and what changed or the fix.
    assert!(start > page.find("id=\"actor\"").unwrap());
    // Evidence without a chain, or with one that is not a JSON array, shows none.
    for id in ["trigger", "plain"] {
        let (status, page) = page_of(&app.router, &format!("/ui/drifts/{id}")).await;
        assert_eq!(status, 200);
        assert!(
            !page.contains("condition-chain") && !page.contains("<script"),
            "{page}"
        );
    }
    // The API shows the fact as it is stored, as JSON text.
    let (status, api) = page_of(&app.router, "/api/v1/drifts/svc").await;
    assert_eq!(status, 200);
    let api: Value = serde_json::from_str(&api).unwrap();
    let stored: Value = serde_json::from_str(
        api["drift"]["evidence"]["facts"]["conditionChain"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(stored, chain);
}

/// `store migrate` moves the service's SQLite store into PostgreSQL, and the service started on
/// PostgreSQL answers with the same drifts, deliveries and silences, and goes on recording.
#[tokio::test]
async fn a_store_migrated_to_postgres_serves_the_same_drifts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("before.db");
    let mut app = Running::start_on(
        tempfile::tempdir().unwrap(),
        &format!("store:\n  path: {}\n", path.display()),
        "",
    )
    .await;
    let edited = app.make_drifts().await;
    let response = app
        .client
        .post(format!("{}/api/v1/silences", app.base))
        .json(&json!({"matchers": {"name": "config-gc"}, "comment": "moving"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    // The log channel delivered every notice due now (attempts are part of what moves); only
    // the reminder, due in hours, stays pending. Captured after that, so the copy on PostgreSQL
    // has nothing left to deliver that would make it differ.
    let delivered = eventually(|| async {
        app.get("/api/v1/deliveries?limit=100").await.1["items"]
            .as_array()
            .is_some_and(|items| {
                items
                    .iter()
                    .all(|item| item["state"] == "delivered" || item["kind"] == "repeat")
            })
    })
    .await;
    assert!(delivered);
    let (_, drifts) = app.get("/api/v1/drifts").await;
    let (_, silences) = app.get("/api/v1/silences").await;
    let (_, deliveries) = app.get("/api/v1/deliveries?limit=100").await;
    let first = drifts["items"][0]["id"].as_str().unwrap().to_string();
    let (_, detail) = app.get(&format!("/api/v1/drifts/{first}")).await;
    assert_eq!(drifts["items"].as_array().unwrap().len(), 3);
    app.stop().await;

    let url = crate::pg::PgServer::shared().database();
    let migrate = |url: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_drift-sentinel"))
            .args([
                "store",
                "migrate",
                "--from",
                &format!("sqlite:{}", path.display()),
            ])
            .args(["--to", url])
            .env_remove("DRIFT_SENTINEL_CONFIG")
            .output()
            .unwrap()
    };
    let output = migrate(&url);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("drifts                     3 rows"),
        "{stdout}"
    );
    assert!(
        stdout.contains("silences                   1 rows"),
        "{stdout}"
    );
    assert!(stdout.contains("Counts checked."), "{stdout}");

    let mut app = Running::start_on(
        tempfile::tempdir().unwrap(),
        &format!("store:\n  url: \"{url}\"\n"),
        "",
    )
    .await;
    assert_eq!(app.get("/api/v1/drifts").await.1, drifts);
    assert_eq!(app.get("/api/v1/silences").await.1, silences);
    assert_eq!(app.get("/api/v1/deliveries?limit=100").await.1, deliveries);
    assert_eq!(app.get(&format!("/api/v1/drifts/{first}")).await.1, detail);
    // It goes on from there: the engine state came along, so reverting a firing drift's
    // edit resolves it.
    let reverted = changed(&edited[0], |c| {
        c["data"].as_object_mut().unwrap().remove("min-scale");
    });
    // The event keys came along too: a CloudEvent id the SQLite store saw is a redelivery here.
    app.next = 0;
    app.send("update", &reverted).await;
    assert_eq!(
        app.get("/api/v1/drifts?state=resolved").await.1["items"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "a redelivered event id takes no effect"
    );
    app.next = 100;
    app.send("update", &reverted).await;
    let (_, resolved) = app.get("/api/v1/drifts?state=resolved").await;
    assert_eq!(resolved["items"].as_array().unwrap().len(), 2);
    app.stop().await;

    // Into a database that holds a store: refused, exit 2, nothing written.
    let output = migrate(&url);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("already holds drift-sentinel data"),
        "{stderr}"
    );
}

/// Issue 27, item 4: a non-ASCII cluster name is shown with its code points beside it, on the
/// list, a drift's page and the report, so a look-alike of another name reads differently; an
/// ASCII name is shown as it is.
#[tokio::test]
async fn the_dashboard_shows_a_non_ascii_cluster_with_its_code_points() {
    let mut app = Running::start("defaultCluster: продакшн\n").await;
    app.make_drifts().await;
    let code_points = r"(\u{43f}\u{440}\u{43e}\u{434}\u{430}\u{43a}\u{448}\u{43d})</code>";
    let (status, index) = app.text("/ui").await;
    assert_eq!(status, 200);
    assert!(
        index.contains(&format!("<td>продакшн <code class=\"cluster-code-points\" title=\"not ASCII: the name's code points\">{code_points}</td>")),
        "{index}"
    );
    let (_, firing) = app.get("/api/v1/drifts?state=firing").await;
    let id = firing["items"][0]["id"].as_str().unwrap().to_string();
    let (_, page) = app.text(&format!("/ui/drifts/{id}")).await;
    assert!(page.contains(code_points), "{page}");
    app.stop().await;
    let mut app = Running::start("defaultCluster: prod-eu\n").await;
    app.make_drifts().await;
    let (_, index) = app.text("/ui").await;
    assert!(index.contains("<td>prod-eu</td>"), "{index}");
    assert!(!index.contains("cluster-code-points"));
    app.stop().await;
}

/// Issue 27, item 4: the fleet view shows a non-ASCII member cluster with its code points, in
/// the member list and the compared object's column head.
#[tokio::test]
async fn the_fleet_view_shows_a_non_ascii_member_with_its_code_points() {
    let app = Running::start(
        "fleet:\n  groups:\n    - name: prod\n      clusters: [\"prod-*\", \"продакшн\"]\n      compare:\n        - {kind: ConfigMap, namespace: knative-serving, name: config-autoscaler}\n",
    )
    .await;
    for (index, cluster) in ["prod-eu", "продакшн"].iter().enumerate() {
        let mut object = config_autoscaler();
        object["metadata"]["uid"] = json!(format!("uid-{index}"));
        let mut event = structured_event(&format!("fleet-{index}"), "add", &object);
        event["cluster"] = json!(cluster);
        let response = app
            .client
            .post(&app.base)
            .header("content-type", "application/cloudevents+json")
            .json(&event)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202);
    }
    let code_points = r#"продакшн <code class="cluster-code-points" title="not ASCII: the name's code points">(\u{43f}\u{440}\u{43e}\u{434}\u{430}\u{43a}\u{448}\u{43d})</code>"#;
    let (status, page) = app.text("/ui/fleet").await;
    assert_eq!(status, 200);
    assert!(
        page.contains(&format!("<tr><td>{code_points}</td>")),
        "{page}"
    );
    assert!(page.contains(&format!("<th>{code_points}</th>")), "{page}");
    assert!(page.contains("<th>prod-eu</th>"), "{page}");
    app.stop().await;
}
