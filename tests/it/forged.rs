//! Forged or hostile events at the HTTP edge (ingest is open unless OIDC or a token is
//! configured): a `cluster` extension that names another cluster for a tracked uid, and
//! `resourceVersion`s made to freeze an object or to be unorderable. None may resolve, freeze or
//! replace the state real events keep.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use drift_sentinel::classify::{Engine, Outcome, Rules};
use drift_sentinel::decode::{self, ClusterNames, Decoded};
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

fn drifts_of(app: &TestApp, class: &str) -> Vec<drift_sentinel::model::Drift> {
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
            .objects()
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
        .objects()
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
        .objects()
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
    let decode = |version: &str| -> decode::ApiServerEvent {
        let mut event = structured_event("x", "update", &with_version(version));
        // Without a send time: what is tested here is what the list alone can tell.
        event.as_object_mut().unwrap().remove("time");
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
            drift_sentinel::classify::ListContext {
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
    let app = app_with_capacity(drift_sentinel::classify::Capacity {
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
        app.store.objects().len(),
        2,
        "the refused object is not stored"
    );
    assert!(app
        .store
        .objects()
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
    let app = app_with_capacity(drift_sentinel::classify::Capacity {
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
        .objects()
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
    assert_eq!(app.store.objects().len(), 3);
}

#[tokio::test]
async fn the_total_cap_holds_across_clusters() {
    let app = app_with_capacity(drift_sentinel::classify::Capacity {
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
    assert_eq!(app.store.objects().len(), 3);
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
