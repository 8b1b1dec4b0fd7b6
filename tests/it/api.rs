//! The drift API and dashboard against the real server, a real SQLite file, and real events.

use std::time::Duration;

use serde_json::{json, Value};

use crate::scenario::{changed, config_autoscaler, written_by};
use crate::support::structured_event;

struct Running {
    base: String,
    server: drift_sentinel::app::Server,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
    next: usize,
}

impl Running {
    async fn start(extra: &str) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let yaml = format!(
            "store:\n  path: {}\nchannels:\n  - {{name: log, type: log}}\nroutes:\n  - {{channels: [log], groupWait: 0s}}\n{extra}",
            dir.path().join("api.db").display()
        );
        let config = drift_sentinel::config::load_str(&yaml, &|_| None).unwrap();
        let server = drift_sentinel::app::start(config, None, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        Running {
            base: format!("http://{}", server.addr),
            server,
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            _dir: dir,
            next: 0,
        }
    }

    async fn send(&mut self, verb: &str, object: &Value) {
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

    async fn get(&self, path: &str) -> (u16, Value) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn text(&self, path: &str) -> (u16, String) {
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

    async fn stop(self) {
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
