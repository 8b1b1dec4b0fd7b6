//! Exported admission policies in front of a cluster, end to end: the fake cluster judges its
//! API's writes with the policies `admission export --protect-managed` writes (as the API server
//! does), and sends the real sink the ApiServerSource event of what it stores. A hand edit of a
//! Revision's Deployment bound with `Warn` goes through with the API server's warning and the
//! sink still reports it (`manual_edit`: the warning is advisory); bound with `Deny` it is
//! refused with the API server's message, nothing is stored, and nothing new fires.

use serde_json::{json, Value};

use crate::drill_e2e::World;
use crate::fake_apiserver::TOKEN;
use crate::fake_cluster::drill_world;
use crate::resync_api::until;
use drift_core::admission::{protect_managed, Action};

const DEPLOYMENT: &str = "/apis/apps/v1/namespaces/drills/deployments/hello-00001-deployment";

/// `kubectl edit`'s write: a JSON patch by field manager `kubectl-edit`.
async fn edit(world: &World, patch: Value) -> reqwest::Response {
    reqwest::Client::new()
        .patch(format!(
            "{}{DEPLOYMENT}?fieldManager=kubectl-edit",
            world.cluster.base()
        ))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json-patch+json")
        .body(patch.to_string())
        .send()
        .await
        .unwrap()
}

/// The sink's `manual_edit` drifts of the Deployment, any state.
async fn manual_edits(world: &World) -> Vec<Value> {
    let page: Value = reqwest::get(format!(
        "{}/api/v1/drifts?namespace=drills&class=manual_edit",
        world.sink.base
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|drift| drift["kind"] == "Deployment" && drift["name"] == "hello-00001-deployment")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warned_hand_edit_still_fires_and_a_denied_one_never_happens() {
    let world = World::start(&[], drill_world()).await;
    assert!(manual_edits(&world).await.is_empty());
    let before = world.cluster.object(DEPLOYMENT).unwrap();

    world
        .cluster
        .install_policies(vec![protect_managed(&[])], Action::Warn);
    let response = edit(
        &world,
        json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image",
                "value": "ghcr.io/knative/helloworld-go:edited"}]),
    )
    .await;
    assert_eq!(response.status(), 200);
    let warning = response
        .headers()
        .get("warning")
        .expect("the API server's warning")
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        warning.starts_with("299 - \"Validation failed for ValidatingAdmissionPolicy 'drift-sentinel-protect-managed'")
            && warning.contains("is managed by Knative"),
        "{warning}"
    );
    let log = world.dir.path().join("sink.log");
    let fired = until("the warned edit's manual_edit", &log, || async {
        let drifts = manual_edits(&world).await;
        (!drifts.is_empty()).then_some(drifts)
    })
    .await;
    assert_eq!(fired.len(), 1, "{fired:#?}");
    assert_eq!(
        fired[0]["evidence"]["actor"]["manager"], "kubectl-edit",
        "{:#}",
        fired[0]
    );
    world.cluster.settled().await;
    let edits_before_deny = manual_edits(&world).await.len();

    world
        .cluster
        .install_policies(vec![protect_managed(&[])], Action::Deny);
    let stored = world.cluster.object(DEPLOYMENT).unwrap();
    let writes = world.cluster.writes();
    let response = edit(
        &world,
        json!([{"op": "replace", "path": "/spec/replicas", "value": 5}]),
    )
    .await;
    assert_eq!(response.status(), 422);
    let status: Value = response.json().await.unwrap();
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with("deployments.apps \"hello-00001-deployment\" is forbidden: ValidatingAdmissionPolicy 'drift-sentinel-protect-managed' with binding 'drift-sentinel-protect-managed' denied request:"),
        "{message}"
    );
    assert_eq!(status["reason"], "Invalid");
    world.cluster.settled().await;
    assert_eq!(world.cluster.object(DEPLOYMENT).unwrap(), stored);
    assert_eq!(world.cluster.writes(), writes);
    assert_eq!(manual_edits(&world).await.len(), edits_before_deny);
    assert_ne!(before["spec"]["replicas"], json!(5));
}
