//! Forged events against the caps, the send-time rule and the cluster-name rules: cases found
//! in the second review of issue 15.

use crate::support::StoredStates;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::forged::{engine_event, Timed};
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

/// A distinct Service (own name and uid) carrying `bytes` of annotation.
fn big_service(index: usize, version: &str, bytes: usize) -> Value {
    let mut object = service();
    object["metadata"]["resourceVersion"] = json!(version);
    object["metadata"]["name"] = json!(format!("big-{index}"));
    object["metadata"]["uid"] = json!(format!("00000000-0000-4000-9000-{index:012}"));
    object["metadata"]["annotations"]["note"] = json!("n".repeat(bytes));
    object
}

#[tokio::test]
async fn deletes_of_new_objects_are_held_to_max_state_bytes() {
    // A delete of a uid never seen creates a tombstone (kept 6 hours) as heavy as the object it
    // carries: without the byte cap on it, deletes could fill memory past limits.maxStateBytes.
    let probe = app();
    post(
        &probe,
        from("prod", "p-1", "add", &big_service(9, "100", 20 * 1024)),
    )
    .await;
    let weight = metric(&probe.metrics, "drift_sentinel_tracked_state_bytes");
    let cap = (weight * 3.5) as usize;
    let app = app_with_capacity(drift_core::classify::Capacity {
        bytes: cap,
        objects: 1000,
        objects_per_cluster: 1000,
        clusters: 10,
    });
    for index in 0..20 {
        let (status, body) = post(
            &app,
            from(
                "prod",
                &format!("d-{index}"),
                "delete",
                &big_service(index, "100", 20 * 1024),
            ),
        )
        .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    let bytes = metric(&app.metrics, "drift_sentinel_tracked_state_bytes");
    assert!(
        bytes <= cap as f64,
        "state holds {bytes} bytes, over limits.maxStateBytes {cap} ({} tombstones of new uids)",
        app.store.states().len()
    );
}

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

#[tokio::test]
async fn a_real_reordered_event_from_a_source_whose_clock_is_ahead_does_not_roll_state_back() {
    // The send-time rule compares the source's clock with itself (the state's own send time),
    // not with this process's: a source whose clock runs 32 s ahead must not make a reordered
    // real event look "sent after" the newer state it follows.
    let timed = Timed::new();
    let skew = 32_000;
    assert_eq!(
        timed
            .send_sent_at("s-1", "add", &edited("100000", "100"), timed.now() + skew)
            .await,
        StatusCode::ACCEPTED
    );
    timed.advance_ms(10_000);
    // The source sends v100001 (target 200) and 100 ms later v100002 (target 300); the Broker
    // delivers v100002 first and v100001 on a retry a second later.
    let sent_first = timed.now() + skew;
    assert_eq!(
        timed
            .send_sent_at("s-3", "update", &edited("100002", "300"), sent_first + 100)
            .await,
        StatusCode::ACCEPTED
    );
    timed.advance_ms(1_000);
    assert_eq!(
        timed
            .send_sent_at("s-2", "update", &edited("100001", "200"), sent_first)
            .await,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        timed.service().resource_version,
        "100002",
        "a reordered older event rolled the state back"
    );
}

#[test]
fn one_forged_event_under_resync_s_name_does_not_hand_every_object_to_resync() {
    // Real events carry `prod` (ceOverrides); resync.cluster is unset, so resync lists under
    // `default`: a misconfiguration that is only a counted conflict... until any one event
    // (forged, or any sender without the extension) uses `default`. From then on
    // `event_clusters` contains `default`, the next resync list "moves" every object the real
    // events track under `prod` to `default` (resolving their drifts), and every later real
    // event from `prod` is a Conflict that is not applied: detection stops for the cluster.
    use drift_core::classify::{Engine, ListContext, Outcome, Rules};
    use std::sync::Arc;
    let mut engine = Engine::new(Arc::new(Rules::default()));
    engine.begin();
    let mut real = service();
    real["metadata"]["resourceVersion"] = json!("100000");
    assert_eq!(
        engine.apply(&engine_event("prod", &real), 0),
        Outcome::Applied
    );
    let list = ListContext {
        version: "100500",
        started_at: 10,
    };
    assert_eq!(
        engine.apply_listed(&engine_event("default", &real), list, 10),
        Outcome::Conflict,
        "resync's misnamed copy is a conflict"
    );
    // One forged event about an unrelated uid, without the cluster extension.
    let junk = big_service(1, "100001", 0);
    assert_eq!(
        engine.apply(&engine_event("default", &junk), 20),
        Outcome::Applied
    );
    let list = ListContext {
        version: "100600",
        started_at: 30,
    };
    engine.apply_listed(&engine_event("default", &real), list, 30);
    let mut next = service();
    next["metadata"]["resourceVersion"] = json!("100700");
    assert_eq!(
        engine.apply(&engine_event("prod", &next), 40),
        Outcome::Applied,
        "the real cluster's next event is no longer applied (the object was handed to resync's \
         misconfigured name by one forged event)"
    );
}
