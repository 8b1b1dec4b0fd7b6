//! The fake cluster and the real sink, end to end: the binary (`resync_api::Process`) takes the
//! fake's events, attributes a drill's edit to `drift-sentinel-drill` from the `managedFields`
//! the fake keeps, and a trusted controller's write of the same field ends it.

use serde_json::{json, Value};

use super::{api, as_manager, client, DRILL, SERVICE};
use crate::fake_cluster::{drill_world, FakeCluster};
use crate::resync_api::{until, Process};
use kube::api::Patch;

const API_LOG: &str = "drift-sentinel.log";

async fn drifts(base: &str, class: &str) -> Option<Vec<Value>> {
    let response = reqwest::get(format!("{base}/api/v1/drifts?class={class}"))
        .await
        .ok()?;
    (response.status() == 200).then_some(())?;
    let page: Value = response.json().await.ok()?;
    page["items"].as_array().cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sink_attributes_a_drill_edit_to_the_drill_and_a_controller_write_to_the_controller() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "store:\n  path: {db}\n\
             channels:\n  - {{name: log, type: log}}\n\
             routes:\n  - {{channels: [log], groupWait: 0s, groupInterval: 0s}}\n",
            db = dir.path().join("sink.db").display()
        ),
    )
    .unwrap();
    let log = dir.path().join(API_LOG);
    let sink = Process::start(&config, &log);
    // The sink may still be starting: the Broker retries until it answers.
    let cluster = FakeCluster::start(&sink.base, drill_world()).await;
    assert_eq!(
        cluster.refused(),
        Vec::<String>::new(),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let client = client(&cluster, dir.path()).await;
    let services = api(&client, "serving.knative.dev", "Service");
    let before = cluster.object(SERVICE).unwrap()["spec"]["traffic"].clone();
    let edit = json!({"spec": {"traffic": [{"latestRevision": true, "percent": 80}, {"latestRevision": true, "percent": 20, "tag": "drill"}]}});
    services
        .patch("hello", &as_manager(DRILL), &Patch::Merge(edit))
        .await
        .unwrap();

    let drift = until("a manual_edit on Service hello", &log, || async {
        drifts(&sink.base, "manual_edit")
            .await?
            .into_iter()
            .find(|drift| {
                drift["kind"] == "Service"
                    && drift["name"] == "hello"
                    && drift["state"] != "resolved"
            })
    })
    .await;
    assert_eq!(drift["namespace"], "drills");
    assert_eq!(drift["evidence"]["actor"]["manager"], DRILL, "{drift}");
    assert_eq!(drift["evidence"]["actor"]["trusted"], false);

    // Knative's controller writes the traffic back: a trusted manager ends the edit.
    services
        .patch(
            "hello",
            &as_manager("controller"),
            &Patch::Merge(json!({"spec": {"traffic": before}})),
        )
        .await
        .unwrap();
    let resolved = until("the manual_edit to resolve", &log, || async {
        drifts(&sink.base, "manual_edit")
            .await?
            .into_iter()
            .find(|candidate| candidate["id"] == drift["id"] && candidate["state"] == "resolved")
    })
    .await;
    assert!(
        resolved["resolution"]
            .as_str()
            .unwrap_or_default()
            .contains("controller"),
        "{resolved}"
    );
    cluster.settled().await;
    assert_eq!(cluster.refused(), Vec::<String>::new());
    drop(sink);
}
