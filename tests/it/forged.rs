//! Forged or hostile events at the HTTP edge (ingest is open unless OIDC or a token is
//! configured): a `cluster` extension that names another cluster for a tracked uid, and
//! `resourceVersion`s made to freeze an object or to be unorderable. None may resolve, freeze or
//! replace the state real events keep.

use crate::support::StoredStates;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use drift_core::classify::{Engine, Outcome, Rules};
use drift_core::decode::{self, ClusterNames, Decoded};
use drift_model::DriftState;
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

/// An event for `object` from cluster `cluster` (the `cluster` extension).
fn from(cluster: &str, id: &str, verb: &str, object: &Value) -> Request<Body> {
    let mut event = structured_event(id, verb, object);
    event["cluster"] = json!(cluster);
    binary_request(&event)
}

/// The Service with `resourceVersion` `version`, edited by `kubectl-edit` to `target` percent of
/// autoscaling target (an annotation on the template: a spec change `manual_edit` reports).
fn edited(version: &str, target: &str) -> Value {
    let mut object = service();
    object["metadata"]["resourceVersion"] = json!(version);
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

fn with_version(version: &str) -> Value {
    let mut object = service();
    object["metadata"]["resourceVersion"] = json!(version);
    object
}

fn drifts_of(app: &TestApp, class: &str) -> Vec<drift_model::Drift> {
    let mut drifts: Vec<_> = app
        .store
        .drifts()
        .into_iter()
        .filter(|drift| drift.class == class)
        .collect();
    drifts.sort_by_key(|drift| drift.since);
    drifts
}

#[tokio::test]
async fn a_cluster_extension_naming_another_cluster_moves_and_resolves_nothing() {
    let app = app();
    assert_eq!(
        post(&app, from("prod", "p-1", "add", &with_version("100000")))
            .await
            .0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        post(
            &app,
            from("prod", "p-2", "update", &edited("100001", "250"))
        )
        .await
        .0,
        StatusCode::ACCEPTED
    );
    let open = drifts_of(&app, "manual_edit");
    assert_eq!(open.len(), 1);
    assert_eq!(
        (open[0].state, open[0].cluster.as_str()),
        (DriftState::Firing, "prod")
    );

    // A forged event: the same uid under another cluster name, with the edit reverted.
    let (status, body) = post(&app, from("evil", "f-1", "update", &with_version("100002"))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(
        metric(&app.metrics, "drift_sentinel_cluster_conflicts_total"),
        1.0
    );
    assert_eq!(
        metric(
            &app.metrics,
            "drift_sentinel_events_total{outcome=\"conflict\"}"
        ),
        1.0
    );
    let still = drifts_of(&app, "manual_edit");
    assert_eq!(still.len(), 1, "nothing moved");
    assert_eq!(
        still[0].state,
        DriftState::Firing,
        "the real drift is not resolved"
    );
    assert!(
        app.store
            .states()
            .iter()
            .all(|object| object.cluster == "prod"),
        "the object stays under its events' name"
    );

    // The real cluster's next edit is still seen: a further edit updates the open drift.
    assert_eq!(
        post(
            &app,
            from("prod", "p-3", "update", &edited("100003", "400"))
        )
        .await
        .0,
        StatusCode::ACCEPTED
    );
    let object = app
        .store
        .states()
        .into_iter()
        .find(|object| object.kind == "Service")
        .unwrap();
    assert_eq!(object.resource_version, "100003");
    let drift = &drifts_of(&app, "manual_edit")[0];
    assert!(drift
        .evidence
        .changes
        .iter()
        .any(|change| change.after == Some(json!("400"))));
}

#[tokio::test]
async fn a_forged_huge_resource_version_does_not_freeze_the_object() {
    let app = app();
    assert_eq!(
        post(&app, from("prod", "h-1", "add", &with_version("100000")))
            .await
            .0,
        StatusCode::ACCEPTED
    );
    // Far beyond anything the cluster has written: applied, but not trusted for ordering.
    let forged = edited("999999999999999", "1");
    assert_eq!(
        post(&app, from("prod", "h-2", "update", &forged)).await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        metric(
            &app.metrics,
            "drift_sentinel_implausible_resource_versions_total"
        ),
        1.0
    );
    // The next real update is applied, not dropped as stale.
    assert_eq!(
        post(
            &app,
            from("prod", "h-3", "update", &edited("100001", "300"))
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
        0.0
    );
    let object = app
        .store
        .states()
        .into_iter()
        .find(|object| object.kind == "Service")
        .unwrap();
    assert_eq!(object.resource_version, "100001");
    assert_eq!(object.confirmed_resource_version, None, "plausible again");
    // And ordering holds again from there: an older real version is stale.
    assert_eq!(
        post(
            &app,
            from("prod", "h-4", "update", &edited("100000", "200"))
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
        1.0
    );
}

#[tokio::test]
async fn a_resource_version_that_is_not_a_decimal_integer_is_a_400() {
    let app = app();
    assert_eq!(
        post(&app, from("prod", "n-1", "add", &with_version("100000")))
            .await
            .0,
        StatusCode::ACCEPTED
    );
    let (status, body) = post(&app, from("prod", "n-2", "update", &with_version("zzz"))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body.contains("data.metadata.resourceVersion: must be a decimal integer"),
        "{body}"
    );
}

#[test]
fn a_listed_state_replaces_a_version_from_the_future() {
    // The first event of a cluster cannot be judged: a forged 10^15 is taken as it is. The API
    // server's own snapshot version (a resync list's) is older than it, which no real object can
    // be: the listed state replaces it.
    let mut engine = Engine::new(Arc::new(Rules::default()));
    let decode = |version: &str| engine_event_as("prod", "update", &with_version(version));
    engine.begin();
    assert_eq!(
        engine.apply(&decode("1000000000000000"), 0),
        Outcome::Applied
    );
    assert_eq!(
        engine.apply(&decode("5000"), 1),
        Outcome::Stale,
        "an event cannot tell"
    );
    assert_eq!(
        engine.apply_listed(
            &decode("4000"),
            drift_core::classify::ListContext {
                version: "6000",
                started_at: 2,
            },
            2
        ),
        Outcome::Applied,
        "the list can"
    );
    assert_eq!(engine.apply(&decode("5000"), 3), Outcome::Applied);
    assert_eq!(engine.apply(&decode("4500"), 4), Outcome::Stale);
}

/// The Service under another name and uid, so it is a distinct object.
fn another_service(index: usize, version: &str) -> Value {
    let mut object = with_version(version);
    object["metadata"]["name"] = json!(format!("flood-{index}"));
    object["metadata"]["uid"] = json!(format!("00000000-0000-4000-8000-{index:012}"));
    object
}

#[tokio::test]
async fn a_flood_of_new_objects_stops_at_the_cap_and_tracked_objects_keep_working() {
    let app = app_with_capacity(drift_core::classify::Capacity {
        bytes: usize::MAX,
        objects: 100,
        objects_per_cluster: 2,
        clusters: 8,
    });
    assert_eq!(
        post(&app, from("prod", "c-1", "add", &with_version("100000")))
            .await
            .0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        post(
            &app,
            from("prod", "c-2", "add", &another_service(1, "100001"))
        )
        .await
        .0,
        StatusCode::ACCEPTED
    );
    // The third object of the cluster is acknowledged (a retry would not fit either) but not
    // tracked, and counted.
    let (status, body) = post(
        &app,
        from("prod", "c-3", "add", &another_service(2, "100002")),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(
        metric(&app.metrics, "drift_sentinel_objects_refused_total"),
        1.0
    );
    assert_eq!(
        metric(
            &app.metrics,
            "drift_sentinel_events_total{outcome=\"over_capacity\"}"
        ),
        1.0
    );
    assert_eq!(
        metric(&app.metrics, "drift_sentinel_cluster_tracked_objects_max"),
        2.0
    );
    assert_eq!(
        metric(&app.metrics, "drift_sentinel_cluster_tracked_objects_limit"),
        2.0
    );
    assert_eq!(
        app.store.states().len(),
        2,
        "the refused object is not stored"
    );
    assert!(app
        .store
        .states()
        .iter()
        .all(|object| object.name != "flood-2"));

    // Another cluster has its own budget.
    assert_eq!(
        post(
            &app,
            from("staging", "s-1", "add", &another_service(3, "500"))
        )
        .await
        .0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        metric(&app.metrics, "drift_sentinel_objects_refused_total"),
        1.0
    );

    // An object already tracked is still classified: its edit fires.
    assert_eq!(
        post(
            &app,
            from("prod", "c-4", "update", &edited("100003", "250"))
        )
        .await
        .0,
        StatusCode::ACCEPTED
    );
    let open = drifts_of(&app, "manual_edit");
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].state, DriftState::Firing);
}

#[tokio::test]
async fn cluster_names_beyond_the_cap_are_refused() {
    let app = app_with_capacity(drift_core::classify::Capacity {
        bytes: usize::MAX,
        objects: 100,
        objects_per_cluster: 100,
        clusters: 2,
    });
    for (index, cluster) in ["a", "b"].iter().enumerate() {
        assert_eq!(
            post(
                &app,
                from(
                    cluster,
                    &format!("k-{index}"),
                    "add",
                    &another_service(index, "100")
                )
            )
            .await
            .0,
            StatusCode::ACCEPTED
        );
    }
    let (status, body) = post(&app, from("c", "k-3", "add", &another_service(3, "100"))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(
        metric(&app.metrics, "drift_sentinel_objects_refused_total"),
        1.0
    );
    let mut clusters: Vec<String> = app
        .store
        .states()
        .into_iter()
        .map(|object| object.cluster)
        .collect();
    clusters.sort();
    assert_eq!(clusters, ["a", "b"]);
    // A known cluster still takes new objects.
    assert_eq!(
        post(&app, from("a", "k-4", "add", &another_service(4, "101")))
            .await
            .0,
        StatusCode::ACCEPTED
    );
    assert_eq!(app.store.states().len(), 3);
}

#[tokio::test]
async fn the_total_cap_holds_across_clusters() {
    let app = app_with_capacity(drift_core::classify::Capacity {
        bytes: usize::MAX,
        objects: 3,
        objects_per_cluster: 100,
        clusters: 100,
    });
    for index in 0..5 {
        let (status, body) = post(
            &app,
            from(
                &format!("cluster-{index}"),
                &format!("t-{index}"),
                "add",
                &another_service(index, "100"),
            ),
        )
        .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    assert_eq!(app.store.states().len(), 3);
    assert_eq!(
        metric(&app.metrics, "drift_sentinel_objects_refused_total"),
        2.0
    );
    assert_eq!(metric(&app.metrics, "drift_sentinel_tracked_objects"), 3.0);
    assert_eq!(
        metric(&app.metrics, "drift_sentinel_tracked_objects_limit"),
        3.0
    );
}
/// Labels are bounded by their bytes, not only their number: 200 labels of 10 KB each would be
/// kept whole in the state and the store (found in review).
#[tokio::test]
async fn the_bytes_of_labels_are_bounded() {
    let app = app();
    let mut object = with_version("100000");
    let labels: serde_json::Map<String, Value> = (0..200)
        .map(|index| (format!("k{index}"), json!("v".repeat(10_000))))
        .collect();
    object["metadata"]["labels"] = Value::Object(labels);
    let (status, body) = post(&app, from("prod", "l-1", "add", &object)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("data.metadata.labels"), "{body}");
}

/// The status is bounded: a condition may carry any extra key, and the state keeps the whole
/// condition object (found in review).
#[tokio::test]
async fn the_status_is_bounded() {
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

/// A `cluster` extension (and a CloudEvent `id`) is bounded: every object's key carries the
/// name, and every conflict remembers its pair of names for logging once (found in review).
#[tokio::test]
async fn cluster_names_are_bounded() {
    let app = app();
    let huge = "c".repeat(254);
    let (status, body) = post(&app, from(&huge, "n-1", "add", &with_version("100000"))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body.contains(
            "\"invalid_event\",\"message\":\"invalid CloudEvent: attribute cluster (extension): is 254 bytes, more than the limit of 253"
        ),
        "{body}"
    );
    assert_eq!(
        post(
            &app,
            from(&"c".repeat(253), "n-2", "add", &with_version("100000"))
        )
        .await
        .0,
        StatusCode::ACCEPTED,
        "a DNS-length name is a name"
    );
    let mut event = structured_event(&"i".repeat(1025), "add", &with_version("100000"));
    event["cluster"] = json!("prod");
    let (status, body) = post(&app, binary_request(&event)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("id: 1025 bytes"), "{body}");
}

/// A value placed where a block can start opens no block even after a leading tab: after a
/// quote marker (`> {summary}`, the built-in template), `\t# H` would be a heading and
/// `\t[x]: https://evil.example` a link reference definition (found in review).
#[test]
fn a_leading_tab_opens_no_block_in_markdown() {
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

/// A delete with an implausible version is not taken (counted): a forged one would resolve the
/// object's real drifts and end the object (found in review).
#[tokio::test]
async fn an_implausible_delete_is_not_taken() {
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

/// A test app on a clock the test moves, and a way to send events stamped with it.
pub(crate) struct Timed {
    pub app: TestApp,
    clock: std::sync::Arc<std::sync::atomic::AtomicI64>,
}

/// 2026-11-29T10:00:00Z.
const START: i64 = 1_795_946_400_000;

impl Timed {
    pub(crate) fn new() -> Timed {
        let clock = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(START));
        let reader = std::sync::Arc::clone(&clock);
        let app = app_with(
            64,
            4 * 1024 * 1024,
            std::sync::Arc::new(move || reader.load(std::sync::atomic::Ordering::SeqCst)),
        );
        Timed { app, clock }
    }

    pub(crate) fn now(&self) -> i64 {
        self.clock.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn advance_ms(&self, ms: i64) {
        self.clock
            .fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }

    fn advance(&self, seconds: i64) {
        self.clock
            .fetch_add(seconds * 1000, std::sync::atomic::Ordering::SeqCst);
    }

    /// Posts an event the source sends now (its CloudEvent `time` is the clock's).
    async fn send(&self, id: &str, verb: &str, object: &Value) -> StatusCode {
        let now = self.clock.load(std::sync::atomic::Ordering::SeqCst);
        self.send_sent_at(id, verb, object, now).await
    }

    /// Posts an event whose CloudEvent `time` is `sent` (a retry keeps its first time).
    pub(crate) async fn send_sent_at(
        &self,
        id: &str,
        verb: &str,
        object: &Value,
        sent: i64,
    ) -> StatusCode {
        let mut event = structured_event(id, verb, object);
        event["cluster"] = json!("prod");
        event["time"] = json!(drift_model::time::format_time_offset(sent));
        post(&self.app, binary_request(&event)).await.0
    }

    pub(crate) fn service(&self) -> drift_core::classify::ObjectState {
        self.app
            .store
            .states()
            .into_iter()
            .find(|object| object.name == "knative-webapp")
            .expect("tracked")
    }
}

#[tokio::test]
async fn a_walked_frontier_freezes_an_object_only_until_an_event_sent_after_it() {
    // Found in review: the frontier moves with every plausible event, so a sender can walk it
    // forward in steps of MAX_JUMP with a junk object and then post the real object at a
    // version that is plausible by then.
    let timed = Timed::new();
    assert_eq!(
        timed.send("r-1", "add", &with_version("100000")).await,
        StatusCode::ACCEPTED
    );
    let step = drift_core::classify::resource_version::MAX_JUMP;
    let mut frontier = 100_000u128;
    for index in 0..20 {
        frontier += step;
        let status = timed
            .send(
                &format!("j-{index}"),
                "update",
                &another_service(1, &frontier.to_string()),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED);
    }
    assert_eq!(
        timed
            .send("f-1", "update", &with_version(&frontier.to_string()))
            .await,
        StatusCode::ACCEPTED
    );
    // A retry of an older real event (sent before the forged state arrived) is stale, as any
    // reordered event is.
    assert_eq!(
        timed
            .send_sent_at("r-0", "update", &edited("100001", "200"), START - 1000)
            .await,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        metric(
            &timed.app.metrics,
            "drift_sentinel_events_total{outcome=\"stale\"}"
        ),
        1.0
    );
    // The next real event the source sends (well after the forged state arrived) is applied.
    timed.advance(60);
    assert_eq!(
        timed.send("r-2", "update", &edited("100002", "250")).await,
        StatusCode::ACCEPTED
    );
    assert_eq!(timed.service().resource_version, "100002");
    // And ordering holds from there: a retry of an older event is stale again.
    assert_eq!(
        timed
            .send_sent_at("r-1b", "update", &edited("100001", "200"), START + 1000)
            .await,
        StatusCode::ACCEPTED
    );
    assert_eq!(timed.service().resource_version, "100002");
}

#[tokio::test]
async fn a_plausible_forged_version_is_replaced_by_the_next_event_sent_after_it() {
    let timed = Timed::new();
    assert_eq!(
        timed.send("m-1", "add", &with_version("100000")).await,
        StatusCode::ACCEPTED
    );
    let forged = (100_000u128 + drift_core::classify::resource_version::MAX_JUMP).to_string();
    assert_eq!(
        timed.send("m-2", "update", &edited(&forged, "999")).await,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        metric(
            &timed.app.metrics,
            "drift_sentinel_implausible_resource_versions_total"
        ),
        0.0,
        "exactly at the bound is plausible"
    );
    // Within the clock-skew allowance an older version cannot be told from a reordered event.
    timed.advance(10);
    timed.send("m-3", "update", &edited("100001", "250")).await;
    assert_eq!(timed.service().resource_version, forged);
    timed.advance(60);
    timed.send("m-4", "update", &edited("100002", "300")).await;
    assert_eq!(timed.service().resource_version, "100002");
    assert_eq!(drifts_of(&timed.app, "manual_edit").len(), 1);
}

#[tokio::test]
async fn a_forged_delete_is_undone_by_the_next_event_sent_after_it() {
    let timed = Timed::new();
    assert_eq!(
        timed.send("d-1", "add", &with_version("100000")).await,
        StatusCode::ACCEPTED
    );
    // Plausible (one write ahead): taken, as a real delete would be.
    assert_eq!(
        timed.send("d-2", "delete", &with_version("100001")).await,
        StatusCode::ACCEPTED
    );
    assert!(timed.service().deleted);
    // A real delete is final: no event of the uid is sent after it. One that is proves the
    // delete was not real, and the object is alive again.
    timed.advance(60);
    assert_eq!(
        timed.send("d-3", "update", &edited("100005", "250")).await,
        StatusCode::ACCEPTED
    );
    let object = timed.service();
    assert!(!object.deleted);
    assert_eq!(object.resource_version, "100005");
    // A retried update sent before the delete arrived does not revive a really deleted object.
    assert_eq!(
        timed.send("d-4", "delete", &with_version("100006")).await,
        StatusCode::ACCEPTED
    );
    timed.advance(60);
    assert_eq!(
        timed
            .send_sent_at("d-5", "update", &with_version("100004"), START)
            .await,
        StatusCode::ACCEPTED
    );
    assert!(timed.service().deleted);
}

#[test]
fn a_listed_object_replaces_a_tombstone_that_arrived_before_the_list() {
    // Found in review: a tombstone accepted nothing, not even the API server's own list showing
    // the object alive. A uid is never re-created, so a list that started after the delete
    // arrived and still holds the object proves the delete was not real; a list that started
    // before it may predate a real delete.
    use drift_core::classify::ListContext;
    let mut engine = Engine::new(Arc::new(Rules::default()));
    let decode = |verb: &str, version: &str| engine_event_as("prod", verb, &with_version(version));
    engine.begin();
    assert_eq!(engine.apply(&decode("add", "5000"), 0), Outcome::Applied);
    assert_eq!(
        engine.apply(&decode("delete", "5001"), 10),
        Outcome::Applied
    );
    // A list that started before the delete arrived: it may predate the delete.
    assert_eq!(
        engine.apply_listed(
            &decode("update", "5000"),
            ListContext {
                version: "5000",
                started_at: 5,
            },
            20,
        ),
        Outcome::Stale
    );
    // A list that started after it and still holds the object: the delete was not real.
    assert_eq!(
        engine.apply_listed(
            &decode("update", "5000"),
            ListContext {
                version: "6000",
                started_at: 30,
            },
            40,
        ),
        Outcome::Applied
    );
}

fn stored_service(app: &TestApp) -> drift_core::classify::ObjectState {
    app.store
        .states()
        .into_iter()
        .find(|object| object.name == "knative-webapp")
        .expect("tracked")
}

/// `object` as a decoded `verb` event from `cluster`, without a send time (what is tested with it
/// is what versions and lists alone tell).
pub(crate) fn engine_event_as(cluster: &str, verb: &str, object: &Value) -> decode::ApiServerEvent {
    let mut event = structured_event("x", verb, object);
    event.as_object_mut().unwrap().remove("time");
    event["cluster"] = json!(cluster);
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
}

/// `object` as a decoded update from `cluster`, without a send time.
pub(crate) fn engine_event(cluster: &str, object: &Value) -> decode::ApiServerEvent {
    engine_event_as(cluster, "update", object)
}

fn clusters_of(engine: &Engine) -> Vec<String> {
    let mut clusters: Vec<String> = engine
        .graph()
        .iter()
        .map(|object| object.cluster.clone())
        .collect();
    clusters.sort();
    clusters
}

#[test]
fn resync_moves_its_own_copies_to_its_name() {
    // The fix of a misconfiguration: resync filed objects under `staging`, then was set to the
    // events' name `prod`. Its own copies move (nothing else would: an event never moves one).
    use drift_core::classify::ListContext;
    let mut engine = Engine::new(Arc::new(Rules::default()));
    engine.begin();
    let list = |started_at| ListContext {
        version: "200000",
        started_at,
    };
    assert_eq!(
        engine.apply_listed(
            &engine_event("staging", &with_version("100000")),
            list(0),
            0
        ),
        Outcome::Applied
    );
    assert_eq!(
        engine.apply(&engine_event("prod", &with_version("100001")), 1),
        Outcome::Conflict
    );
    assert_eq!(
        engine.apply_listed(&engine_event("prod", &with_version("100000")), list(2), 2),
        Outcome::Applied
    );
    assert_eq!(clusters_of(&engine), ["prod"]);
    assert_eq!(
        engine.apply(&engine_event("prod", &with_version("100001")), 3),
        Outcome::Applied
    );
}

#[test]
fn resync_replaces_a_copy_events_filed_elsewhere_only_when_events_for_it_agree() {
    use drift_core::classify::ListContext;
    let list = ListContext {
        version: "200000",
        started_at: 0,
    };
    // Events filed the object under `evil`: resync's `prod` may be the wrong name, so the object
    // is a conflict, not moved...
    let mut engine = Engine::new(Arc::new(Rules::default()));
    engine.begin();
    assert_eq!(
        engine.apply(&engine_event("evil", &with_version("100000")), 0),
        Outcome::Applied
    );
    assert_eq!(
        engine.apply_listed(&engine_event("prod", &with_version("100000")), list, 1),
        Outcome::Conflict
    );
    // ...and events for other objects under `prod` do not decide it (any sender can post them).
    for index in 0..3 {
        assert_eq!(
            engine.apply(
                &engine_event("prod", &another_service(7 + index, "100001")),
                2
            ),
            Outcome::Applied
        );
    }
    assert_eq!(
        engine.apply_listed(&engine_event("prod", &with_version("100000")), list, 3),
        Outcome::Conflict
    );
    assert_eq!(clusters_of(&engine), ["evil", "prod", "prod", "prod"]);
    // An event for this very object under `prod` (refused as a conflict) and the API server's
    // list under `prod` agree against the copy under `evil` (a forged first event, or a cluster
    // renamed on a running install): the list moves it.
    assert_eq!(
        engine.apply(&engine_event("prod", &with_version("100002")), 4),
        Outcome::Conflict
    );
    assert_eq!(
        engine.apply_listed(&engine_event("prod", &with_version("100002")), list, 5),
        Outcome::Applied
    );
    assert_eq!(clusters_of(&engine), ["prod", "prod", "prod", "prod"]);
    // From then on the object's events apply.
    assert_eq!(
        engine.apply(&engine_event("prod", &with_version("100003")), 6),
        Outcome::Applied
    );
}

#[tokio::test]
async fn the_state_s_bytes_are_capped_and_a_change_that_would_pass_the_cap_is_refused() {
    // Found in review: counting objects does not bound memory; a few large objects can cost as
    // much as thousands of small ones.
    let big = |index: usize, version: &str| {
        let mut object = another_service(index, version);
        object["metadata"]["annotations"]["note"] = json!("n".repeat(20 * 1024));
        object
    };
    // What one such object weighs, measured on an app without a byte cap.
    let probe = app();
    post(&probe, from("prod", "p-1", "add", &big(9, "100"))).await;
    let weight = metric(&probe.metrics, "drift_sentinel_tracked_state_bytes");
    assert!(weight > 20.0 * 1024.0, "{weight}");
    let cap = (weight * 3.5) as usize;
    let app = app_with_capacity(drift_core::classify::Capacity {
        bytes: cap,
        objects: 1000,
        objects_per_cluster: 1000,
        clusters: 10,
    });
    for index in 0..4 {
        let (status, body) = post(
            &app,
            from("prod", &format!("b-{index}"), "add", &big(index, "100")),
        )
        .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    // Three fit, the fourth does not.
    assert_eq!(app.store.states().len(), 3);
    assert_eq!(
        metric(&app.metrics, "drift_sentinel_objects_refused_total"),
        1.0
    );
    let bytes = metric(&app.metrics, "drift_sentinel_tracked_state_bytes");
    assert_eq!(bytes, weight * 3.0, "{bytes} bytes tracked");
    assert_eq!(
        metric(&app.metrics, "drift_sentinel_tracked_state_bytes_limit"),
        cap as f64
    );
    // An object already tracked may not grow past the cap either...
    let mut grown = big(0, "101");
    grown["metadata"]["annotations"]["note"] = json!("n".repeat(40 * 1024));
    post(&app, from("prod", "g-1", "update", &grown)).await;
    assert_eq!(
        metric(&app.metrics, "drift_sentinel_objects_refused_total"),
        2.0
    );
    // ...but a change that does not grow it is applied, and a delete always is.
    let mut same = big(0, "102");
    same["metadata"]["annotations"]["note"] = json!("m".repeat(20 * 1024));
    post(&app, from("prod", "g-2", "update", &same)).await;
    // The delete carries a larger object than the state holds (at the cap): taken, as a lean
    // tombstone that keeps the delete's own labels (what unexpected_delete judges).
    let mut deleted = big(1, "103");
    deleted["metadata"]["annotations"]["note"] = json!("d".repeat(60 * 1024));
    deleted["metadata"]["labels"]["serving.knative.dev/routingState"] = json!("reserve");
    post(&app, from("prod", "g-3", "delete", &deleted)).await;
    let objects = app.store.states();
    let first = objects
        .iter()
        .find(|object| object.name == "flood-0")
        .unwrap();
    assert_eq!(first.resource_version, "102");
    let tombstone = objects
        .iter()
        .find(|object| object.name == "flood-1")
        .unwrap();
    assert!(tombstone.deleted);
    assert_eq!(
        tombstone.label("serving.knative.dev/routingState"),
        Some("reserve")
    );
    assert!(tombstone.spec.is_null(), "the tombstone is lean");
}

#[tokio::test]
async fn a_forged_event_without_a_send_time_is_undone_by_the_next_real_event() {
    // Found in review: CloudEvent `time` is optional; a state made by an event without it must
    // not be taken for the API server's own (which the send-time rule never overrules).
    let timed = Timed::new();
    assert_eq!(
        timed.send("t-1", "add", &with_version("100000")).await,
        StatusCode::ACCEPTED
    );
    let mut forged = structured_event("t-2", "delete", &with_version("100001"));
    forged["cluster"] = json!("prod");
    forged.as_object_mut().unwrap().remove("time");
    assert_eq!(
        post(&timed.app, binary_request(&forged)).await.0,
        StatusCode::ACCEPTED
    );
    assert!(timed.service().deleted);
    timed.advance(60);
    assert_eq!(
        timed.send("t-3", "update", &edited("100002", "250")).await,
        StatusCode::ACCEPTED
    );
    assert!(!timed.service().deleted);
}
