//! Adversarial review of issue 15, items 4–7 (branch `h15-review`): tests that demonstrate
//! defects found in the implementation on main. Each is expected to FAIL until the defect is
//! fixed; none changes product code.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use drift_sentinel::model::DriftState;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::scenario::{service, written_by};
use crate::support::*;

async fn post(app: &TestApp, request: Request<Body>) -> (StatusCode, String) {
    let response = app.router.clone().oneshot(request).await.expect("answers");
    let status = response.status();
    (
        status,
        String::from_utf8_lossy(&body_bytes(response).await).to_string(),
    )
}

fn from(cluster: &str, id: &str, verb: &str, object: &Value) -> Request<Body> {
    let mut event = structured_event(id, verb, object);
    event["cluster"] = json!(cluster);
    binary_request(&event)
}

fn with_version(version: &str) -> Value {
    let mut object = service();
    object["metadata"]["resourceVersion"] = json!(version);
    object
}

/// The Service edited by `kubectl-edit` (autoscaling target annotation): a `manual_edit`.
fn edited(version: &str, target: &str) -> Value {
    let mut object = with_version(version);
    object["spec"]["template"]["metadata"]["annotations"]["autoscaling.knative.dev/target"] =
        json!(target);
    written_by(
        &mut object,
        "kubectl-edit",
        "Update",
        json!({"f:spec": {"f:template": {"f:metadata": {"f:annotations": {
            "f:autoscaling.knative.dev/target": {}}}}}}),
        "2026-11-29T10:00:00Z",
    );
    object
}

/// Another object (own uid and name) of the same shape.
fn junk(index: usize, version: &str) -> Value {
    let mut object = with_version(version);
    object["metadata"]["name"] = json!(format!("junk-{index}"));
    object["metadata"]["uid"] = json!(format!("00000000-0000-4000-8000-{index:012}"));
    object
}

fn stored_service(app: &TestApp) -> drift_sentinel::classify::ObjectState {
    app.store
        .objects()
        .into_iter()
        .find(|object| object.name == "knative-webapp")
        .expect("tracked")
}

/// Item 5. The frontier moves with every plausible event, so a sender can walk it forward in
/// steps of MAX_JUMP with a junk object and then post a version for the real object that is
/// "plausible" by then: every later real update of that object is stale. The plausibility
/// rule bounds nothing once the frontier itself can be forged.
#[tokio::test]
async fn review_h15_frontier_ratchet_freezes_a_real_object() {
    let app = app();
    let real = 100_000u128;
    assert_eq!(
        post(
            &app,
            from("prod", "r-1", "add", &with_version(&real.to_string()))
        )
        .await
        .0,
        StatusCode::ACCEPTED
    );
    // Forged: a junk object, each step exactly MAX_JUMP past the frontier (plausible).
    let step = drift_sentinel::classify::resource_version::MAX_JUMP;
    let mut frontier = real;
    for index in 0..20 {
        frontier += step;
        let (status, body) = post(
            &app,
            from(
                "prod",
                &format!("j-{index}"),
                "update",
                &junk(1, &frontier.to_string()),
            ),
        )
        .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    // Forged: the real object at the ratcheted frontier (100 million writes ahead).
    let (status, _) = post(
        &app,
        from(
            "prod",
            "f-1",
            "update",
            &with_version(&frontier.to_string()),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    // The real cluster's next edit must be applied (it is not: it is stale).
    assert_eq!(
        post(
            &app,
            from("prod", "r-2", "update", &edited("100001", "250"))
        )
        .await
        .0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        metric(
            &app.metrics,
            "drift_sentinel_events_total{outcome=\"stale\"}"
        ),
        0.0,
        "the real update was dropped as stale: the object is frozen"
    );
    assert_eq!(stored_service(&app).resource_version, "100001");
}

/// Item 5. A single forged update exactly MAX_JUMP ahead of the frontier is "plausible" and
/// freezes the object until the cluster has written five million times (days in a quiet
/// cluster); without resync, nothing heals it earlier.
#[tokio::test]
async fn review_h15_a_version_at_exactly_max_jump_freezes_the_object() {
    let app = app();
    assert_eq!(
        post(&app, from("prod", "m-1", "add", &with_version("100000")))
            .await
            .0,
        StatusCode::ACCEPTED
    );
    let forged = (100_000u128 + drift_sentinel::classify::resource_version::MAX_JUMP).to_string();
    assert_eq!(
        post(&app, from("prod", "m-2", "update", &with_version(&forged)))
            .await
            .0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        post(
            &app,
            from("prod", "m-3", "update", &edited("100001", "250"))
        )
        .await
        .0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        stored_service(&app).resource_version,
        "100001",
        "the next real event replaces the forged state"
    );
}

/// Item 5. A forged *delete* with an implausible version is applied as a tombstone; a tombstone
/// accepts nothing (`accepts`: `previous.deleted` → false), so the "next real event replaces
/// it" promise does not hold: the object's open drift is resolved ("object deleted") and every
/// later real edit is dropped as stale until the tombstone is pruned 6 hours later.
#[tokio::test]
async fn review_h15_an_implausible_forged_delete_does_not_end_the_object() {
    let app = app();
    assert_eq!(
        post(&app, from("prod", "d-1", "add", &with_version("100000")))
            .await
            .0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        post(
            &app,
            from("prod", "d-2", "update", &edited("100001", "250"))
        )
        .await
        .0,
        StatusCode::ACCEPTED
    );
    let firing: Vec<_> = app
        .store
        .drifts()
        .into_iter()
        .filter(|drift| drift.class == "manual_edit" && drift.state == DriftState::Firing)
        .collect();
    assert_eq!(firing.len(), 1);
    // Forged delete, far beyond the frontier (counted as implausible).
    let (status, _) = post(
        &app,
        from("prod", "d-3", "delete", &with_version("999999999999999")),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(
        metric(
            &app.metrics,
            "drift_sentinel_implausible_resource_versions_total"
        ),
        1.0
    );
    let open: Vec<_> = app
        .store
        .drifts()
        .into_iter()
        .filter(|drift| drift.class == "manual_edit" && drift.state != DriftState::Resolved)
        .collect();
    assert_eq!(
        open.len(),
        1,
        "an implausible (untrusted) delete must not resolve the real drift"
    );
    // And the next real event is applied.
    post(
        &app,
        from("prod", "d-4", "update", &edited("100002", "300")),
    )
    .await;
    let object = stored_service(&app);
    assert!(
        !object.deleted && object.resource_version == "100002",
        "the real update replaces the forged delete: deleted={} version={}",
        object.deleted,
        object.resource_version
    );
}

/// Item 7. The documented per-object bounds count labels, not their size: 200 labels of 10 KB
/// each (Kubernetes allows 63-character values) are accepted and kept whole in the state and
/// the store, ~2 MB per object, 250 times the README's "about 8 KB per object".
#[tokio::test]
async fn review_h15_label_values_are_not_bounded() {
    let app = app();
    let mut object = with_version("100000");
    let labels: serde_json::Map<String, Value> = (0..200)
        .map(|index| (format!("k{index}"), json!("v".repeat(10_000))))
        .collect();
    object["metadata"]["labels"] = Value::Object(labels);
    let (status, body) = post(&app, from("prod", "l-1", "add", &object)).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "2 MB of labels on one object is kept: {body}"
    );
}

/// Item 7. The status the state keeps is not bounded: a condition carries any extra key, and
/// `strip_condition_times` keeps the whole condition object.
#[tokio::test]
async fn review_h15_kept_status_is_not_bounded() {
    let app = app();
    let mut object = with_version("100000");
    object["status"]["conditions"][0]["junk"] = json!("x".repeat(3 * 1024 * 1024));
    let (status, body) = post(&app, from("prod", "s-1", "add", &object)).await;
    if status == StatusCode::ACCEPTED {
        let kept = stored_service(&app).status.text().len();
        panic!("3 MiB of junk in one condition was accepted and kept: status is {kept} bytes");
    }
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

/// Item 7. A `cluster` extension (and the CloudEvent `id`) of any length is taken: one
/// object's key carries a multi-megabyte cluster name, and every conflict remembers its pair
/// of names (`Misnamed::logged`, up to 1000 pairs) for the life of the process.
#[tokio::test]
async fn review_h15_cluster_names_are_not_bounded() {
    let app = app();
    let huge = "c".repeat(2 * 1024 * 1024);
    let (status, body) = post(&app, from(&huge, "n-1", "add", &with_version("100000"))).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "a 2 MiB cluster name is accepted as a cluster: {}",
        &body[..body.len().min(200)]
    );
}

/// Item 10. `Markup::Markdown` promises that a value placed where a block can start opens no
/// block (heading, reference definition, ...). It trims only spaces before looking at the first
/// character, so a leading TAB slips through: after a quote marker (`> {summary}`, the built-in
/// template), `\t# H` is a heading and
/// `\t[x]: https://evil.example` a link reference definition that turns a `[x]` in any other
/// value into a link.
#[test]
fn review_h15_a_leading_tab_opens_a_block_in_markdown() {
    use drift_sentinel::deliver::render::Markup;
    use pulldown_cmark::{Event, Parser, Tag};
    let effects = |text: &str| -> (usize, Vec<String>) {
        let mut headings = 0;
        let mut links = Vec::new();
        for event in Parser::new(text) {
            match event {
                Event::Start(Tag::Heading { .. }) => headings += 1,
                Event::Start(Tag::Link { dest_url, .. }) => links.push(dest_url.to_string()),
                _ => {}
            }
        }
        (headings, links)
    };
    // The built-in Markdown template writes the summary as `> {summary}`.
    let quoted = format!("> {}\n", Markup::Markdown.text("\t# Pwned"));
    let headings = effects(&quoted).0;
    // The same quote position, a definition, and a `[x]` in another value.
    let text = format!(
        "> {}\n\n- **Object**: {}\n",
        Markup::Markdown.text("\t[x]: https://evil.example/login"),
        Markup::Markdown.text("please [x] to verify")
    );
    let links = effects(&text).1;
    assert_eq!(
        (headings, links.clone()),
        (0, Vec::<String>::new()),
        "a heading ({quoted:?}) or a link ({text:?}) from values"
    );
}

/// Item 5. "A resync list ... replaces any state with a newer version than that snapshot" does
/// not hold for a tombstone: a forged delete from the future (implausible, or the first event
/// of a cluster) stays in force after the API server's own list shows the object alive.
#[test]
fn review_h15_a_listed_state_does_not_replace_a_delete_from_the_future() {
    use drift_sentinel::classify::{Engine, Outcome, Rules};
    use drift_sentinel::decode::{self, ClusterNames, Decoded};
    let decode = |verb: &str, version: &str| -> decode::ApiServerEvent {
        let event = structured_event("x", verb, &with_version(version));
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "content-type",
            "application/cloudevents+json".parse().unwrap(),
        );
        let clusters = ClusterNames {
            default: "prod".into(),
            by_source: Default::default(),
        };
        match decode::decode_request(&headers, &serde_json::to_vec(&event).unwrap(), &clusters)
            .unwrap()
            .remove(0)
        {
            Decoded::ApiServer(event) => *event,
            Decoded::Ignored { .. } => panic!("not an ApiServerSource event"),
        }
    };
    let mut engine = Engine::new(std::sync::Arc::new(Rules::default()));
    engine.begin();
    assert_eq!(engine.apply(&decode("add", "5000"), 0), Outcome::Applied);
    // Forged: a delete far in the future (implausible: counted, "not trusted for ordering").
    assert_eq!(
        engine.apply(&decode("delete", "1000000000000000"), 1),
        Outcome::Applied
    );
    assert_eq!(engine.implausible_versions(), 1);
    // The API server lists the object alive at snapshot 6000.
    assert_eq!(
        engine.apply_listed(&decode("update", "5000"), "6000", 2),
        Outcome::Applied,
        "the list shows the object alive; the forged tombstone stays"
    );
}
