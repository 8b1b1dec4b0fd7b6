//! The API's and dashboard's bounds (issue 27): fleet reads answered without the writer (from
//! the snapshot it publishes), an unknown fleet group not repeated, control characters shown as
//! escapes on every page, `limit` semantics shared by every list, and the cap on active silences
//! with the silences list in pages. Real server, real SQLite file, real HTTP (the writer-blocked
//! test uses the test store that can hold a commit).

use std::time::Duration;

use serde_json::{json, Value};
use tower::ServiceExt;

use crate::scenario::{changed, config_autoscaler, written_by};
use crate::support::{body_bytes, structured_event, structured_request};

use crate::api::Running;

impl Running {
    async fn post_silence(&self, comment: &str) -> (u16, Value) {
        let response = self
            .client
            .post(format!("{}/api/v1/silences", self.base))
            .json(&json!({
                "matchers": {"class": "config_drift", "name": comment},
                "comment": comment,
            }))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

const FLEET: &str = "fleet:\n  groups:\n    - name: prod\n      clusters: [\"default\", \"prod-*\"]\n      compare:\n        - {apiVersion: v1, kind: ConfigMap, namespace: knative-serving, name: \"config-*\"}\n";

#[tokio::test]
async fn the_fleet_page_does_not_repeat_a_group_it_does_not_know() {
    let app = Running::start(FLEET).await;
    let (status, page) = app.text("/ui/fleet?group=zz-no-such-group-42").await;
    assert_eq!(status, 200);
    assert!(!page.contains("zz-no-such-group-42"), "{page}");
    assert!(page.contains("No fleet group by that name"), "{page}");
    // A known group is shown by its name, as before.
    let (status, page) = app.text("/ui/fleet?group=prod").await;
    assert_eq!(status, 200);
    assert!(page.contains("id=\"group-prod\""), "{page}");
    // A parameter a page does not take: the page says what that page takes (the fleet page
    // used to describe the drift list's filters), never the value.
    for (path, takes) in [
        ("/ui/fleet?zz-param=zz-value", "The fleet page takes group"),
        ("/ui/report?zz-param=zz-value", "The report takes group"),
    ] {
        let (status, page) = app.text(path).await;
        assert_eq!(status, 400, "{path}");
        assert!(page.contains(takes), "{path}: {page}");
        assert!(!page.contains("zz-"), "{path}: {page}");
    }
    // A drift that does not exist is not named back either.
    let (status, page) = app.text("/ui/drifts/zz-no-such-drift").await;
    assert_eq!(status, 404);
    assert!(!page.contains("zz-no-such-drift"), "{page}");
    app.stop().await;
}

/// True when `text` holds a control character other than tab and line feed.
fn has_raw_control(text: &str) -> bool {
    text.chars()
        .any(|character| character.is_control() && character != '\n' && character != '\t')
}

#[tokio::test]
async fn control_characters_of_objects_show_as_escapes_on_every_page() {
    let mut app = Running::start(FLEET).await;
    let mut base = config_autoscaler();
    base["metadata"]["uid"] = json!("uid-ctl");
    base["data"]["nul\u{0}key"] = json!("v\u{0}\u{1b}[31mred");
    app.send("add", &base).await;
    let edited = changed(&base, |c| {
        c["data"]["nul\u{0}key"] = json!("w\u{0}\u{1b}[31mred");
        written_by(
            c,
            "kubectl-edit",
            "Update",
            json!({"f:data": {"f:nul\u{0}key": {}}}),
            "2026-11-29T09:00:00Z",
        );
    });
    app.send("update", &edited).await;
    // Read at once, without polling: the fleet view answers with what was committed before
    // the 202.
    let (status, fleet) = app.text("/ui/fleet").await;
    assert_eq!(status, 200);
    assert!(fleet.contains("config-autoscaler"), "{fleet}");
    assert!(
        !has_raw_control(&fleet),
        "raw control character in /ui/fleet"
    );
    assert!(fleet.contains("nul\\u0000key"), "{fleet}");
    let (_, drifts) = app.get("/api/v1/drifts").await;
    let id = drifts["items"][0]["id"]
        .as_str()
        .expect("a drift")
        .to_string();
    for path in [
        "/ui".to_string(),
        format!("/ui/drifts/{id}"),
        "/ui/report".into(),
        // Markdown is read in terminals and CI logs too (found in the README walk-through).
        "/api/v1/report?format=markdown".into(),
    ] {
        let (status, page) = app.text(&path).await;
        assert_eq!(status, 200, "{path}");
        assert!(!has_raw_control(&page), "raw control character in {path}");
    }
    // The object's text is on the pages, shown escaped.
    for path in ["/ui".to_string(), format!("/ui/drifts/{id}")] {
        let (_, page) = app.text(&path).await;
        assert!(page.contains("nul\\u0000key"), "{path}: {page}");
    }
    app.stop().await;
}

#[tokio::test]
async fn limit_zero_is_a_400_and_a_limit_past_the_cap_says_it_was_capped_on_every_list() {
    let app = Running::start("").await;
    for list in ["/api/v1/drifts", "/api/v1/deliveries", "/api/v1/silences"] {
        let (status, body) = app.get(&format!("{list}?limit=0")).await;
        assert_eq!(status, 400, "{list}");
        assert_eq!(body["code"], "invalid_query", "{list}");
        assert!(
            body["message"].as_str().unwrap().contains("limit"),
            "{list}"
        );
        let (status, body) = app.get(&format!("{list}?limit=100000")).await;
        assert_eq!(status, 200, "{list}");
        assert_eq!(body["limit"], 500, "{list}");
        assert_eq!(body["limitCapped"], true, "{list}");
        let (status, body) = app.get(&format!("{list}?limit=7")).await;
        assert_eq!(status, 200, "{list}");
        assert_eq!(body["limit"], 7, "{list}");
        assert_eq!(body["limitCapped"], false, "{list}");
        let (_, body) = app.get(list).await;
        assert_eq!(body["limit"], 100, "{list}");
        // A number past what fits is capped like any other large one (it was a 400 "number
        // too large to fit in target type"); a sign or a word is a 400 that says what it takes.
        let (status, body) = app
            .get(&format!("{list}?limit=99999999999999999999999"))
            .await;
        assert_eq!(status, 200, "{list}: {body}");
        assert_eq!(body["limitCapped"], true, "{list}");
        for bad in ["-1", "ten", "1.5"] {
            let (status, body) = app.get(&format!("{list}?limit={bad}")).await;
            assert_eq!(status, 400, "{list}?limit={bad}");
            assert!(
                body["message"]
                    .as_str()
                    .unwrap()
                    .contains("limit must be a whole number"),
                "{list}?limit={bad}: {body}"
            );
        }
    }
    app.stop().await;
}

#[tokio::test]
async fn active_silences_are_capped_with_a_409_and_listed_in_pages() {
    let app = Running::start(
        "limits:\n  maxActiveSilences: 3\nrules:\n  silences:\n    - {matchers: {class: not_ready}, comment: configured}\n",
    )
    .await;
    let mut ids = Vec::new();
    for index in 0..3 {
        let (status, body) = app.post_silence(&format!("s{index}")).await;
        assert_eq!(status, 201, "{body}");
        ids.push(body["id"].as_str().unwrap().to_string());
    }
    let (status, body) = app.post_silence("one-too-many").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "too_many_silences");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("limits.maxActiveSilences"),
        "{body}"
    );
    // Removing one makes room.
    let response = app
        .client
        .delete(format!("{}/api/v1/silences/{}", app.base, ids[0]))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    let (status, body) = app.post_silence("s3").await;
    assert_eq!(status, 201, "{body}");
    // Pages of one, two or three, following nextCursor, list the configured silence (first)
    // and the three API ones once each.
    for size in 1..=3 {
        let mut seen = Vec::new();
        let mut path = format!("/api/v1/silences?limit={size}");
        loop {
            let (status, page) = app.get(&path).await;
            assert_eq!(status, 200, "{path}");
            let items = page["items"].as_array().unwrap();
            assert!(items.len() <= size && !items.is_empty(), "{page}");
            for item in items {
                seen.push(item["id"].as_str().unwrap().to_string());
            }
            match page["nextCursor"].as_str() {
                Some(cursor) => path = format!("/api/v1/silences?limit={size}&cursor={cursor}"),
                None => break,
            }
        }
        assert_eq!(seen.len(), 4, "{seen:?}");
        assert_eq!(seen[0], "config-0");
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 4, "{seen:?}");
    }
    // A forged cursor at the largest index is past every configured silence, not an overflow.
    let (status, page) = app
        .get("/api/v1/silences?cursor=config.18446744073709551615")
        .await;
    assert_eq!(status, 200, "{page}");
    assert!(page["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|item| item["id"] != "config-0"));
    let (status, body) = app.get("/api/v1/silences?cursor=x").await;
    assert_eq!(status, 400);
    assert_eq!(body["code"], "invalid_query");
    app.stop().await;
}

#[tokio::test]
async fn the_dashboards_silence_form_at_the_cap_gets_a_page_that_says_why() {
    let mut app = Running::start("limits:\n  maxActiveSilences: 1\n").await;
    let mut base = config_autoscaler();
    base["metadata"]["uid"] = json!("uid-capped");
    app.send("add", &base).await;
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
    app.send("update", &edited).await;
    let (_, drifts) = app.get("/api/v1/drifts").await;
    let id = drifts["items"][0]["id"]
        .as_str()
        .expect("a drift")
        .to_string();
    let (status, _) = app.post_silence("fills the cap").await;
    assert_eq!(status, 201);
    let response = app
        .client
        .post(format!("{}/ui/silences", app.base))
        .form(&[("drift", id.as_str()), ("duration", "1h")])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let page = response.text().await.unwrap();
    assert!(page.contains("limits.maxActiveSilences"), "{page}");
    let (_, listed) = app.get("/api/v1/silences").await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    app.stop().await;
}

#[test]
fn the_silence_cap_is_validated_naming_its_key() {
    for bad in ["0", "1000001"] {
        let yaml = format!("limits:\n  maxActiveSilences: {bad}\n");
        let error = drift_core::config::load_str(&yaml, &|_| None)
            .err()
            .unwrap_or_else(|| panic!("maxActiveSilences {bad} loads"))
            .to_string();
        assert!(error.contains("limits.maxActiveSilences"), "{error}");
    }
    let config =
        drift_core::config::load_str("limits:\n  maxActiveSilences: 7\n", &|_| None).unwrap();
    assert_eq!(config.limits.max_active_silences, 7);
    let config = drift_core::config::load_str("{}", &|_| None).unwrap();
    assert_eq!(config.limits.max_active_silences, 1000);
}

#[tokio::test]
async fn fleet_reads_are_answered_while_the_writer_is_held_and_take_no_room_in_its_queue() {
    let queue = 4;
    let app = crate::support::app_with(queue, 4 * 1024 * 1024, drift_model::time::system_clock());
    // The writer takes one event and is held in its commit.
    app.store.set_blocked(true);
    let router = app.router.clone();
    let held = tokio::spawn(async move {
        router
            .oneshot(structured_request(&structured_event(
                "held",
                "add",
                &config_autoscaler(),
            )))
            .await
            .unwrap()
            .status()
    });
    // Setup, not an assertion: let the writer take the event (the checks below hold either way).
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Many more readers than the queue has room for: every one is answered from the published
    // view while the writer is still held.
    let mut readers = Vec::new();
    for index in 0..(4 * queue) {
        let router = app.router.clone();
        let path = if index % 2 == 0 {
            "/api/v1/fleet"
        } else {
            "/ui/fleet"
        };
        readers.push(tokio::spawn(async move {
            let response = router
                .oneshot(
                    axum::http::Request::get(path)
                        .body(axum::body::Body::empty())
                        .unwrap(),
                )
                .await
                .unwrap();
            let status = response.status().as_u16();
            (status, body_bytes(response).await)
        }));
    }
    for reader in readers {
        let (status, body) = tokio::time::timeout(Duration::from_secs(20), reader)
            .await
            .expect("a fleet read waits for the held writer")
            .unwrap();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }
    assert!(!held.is_finished(), "the writer is still held");
    // The reads took no room in the writer's queue: it still takes `queue - 1` more submissions
    // (the held event is in the round or in the queue).
    for _ in 0..queue - 1 {
        assert!(app.pipeline.submit(Vec::new()).is_ok());
    }
    app.store.set_blocked(false);
    assert_eq!(held.await.unwrap(), 202);
}
