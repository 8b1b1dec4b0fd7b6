//! What the engine asks the store to record: a pending episode of a reassessable class lives in
//! memory until it fires or lasts `RECORD_PENDING_AFTER_MS`, is found again after a restart, and
//! an episode about a change is recorded at once. Checked on the changes the writer commits.

use axum::http::StatusCode;
use drift_core::classify::RECORD_PENDING_AFTER_MS;
use drift_model::DriftState;
use serde_json::json;
use tower::ServiceExt;

use crate::scenario::*;

/// The history as `from→to class @seconds after T0`.
fn history(sim: &Sim) -> Vec<String> {
    sim.history
        .iter()
        .map(|transition| {
            format!(
                "{}→{} {} @{}",
                transition.from.map_or("none", DriftState::as_str),
                transition.drift.state.as_str(),
                transition.drift.class,
                (transition.at - T0) / 1000
            )
        })
        .collect()
}

/// After a restart: the drift opened at T0 and restored stays pending until `seconds` after T0
/// and fires then, on its original schedule (nothing else is logged after the restart).
fn fires_after_restart_at(sim: &mut Sim, seconds: i64) {
    sim.wait(1);
    sim.wait(seconds - 1 - sim.elapsed_seconds());
    check(
        sim.lines(),
        &["pending generation_lag Service/knative-webapp"],
    );
    sim.wait(1);
    check(
        sim.lines(),
        &[
            "pending generation_lag Service/knative-webapp",
            "firing generation_lag Service/knative-webapp",
        ],
    );
}

fn stuck_service() -> serde_json::Value {
    changed(&service(), |s| s["metadata"]["generation"] = json!(2))
}

fn caught_up(stuck: &serde_json::Value) -> serde_json::Value {
    changed(stuck, |s| s["status"]["observedGeneration"] = json!(2))
}

#[test]
fn a_short_pending_episode_is_counted_but_never_recorded() {
    let mut sim = Sim::new();
    let stuck = stuck_service();
    sim.send("update", &stuck);
    sim.wait(5);
    sim.send("update", &caught_up(&stuck));
    check(
        sim.lines(),
        &[
            "pending generation_lag Service/knative-webapp",
            "resolved generation_lag Service/knative-webapp",
        ],
    );
    assert!(sim.rows.is_empty(), "no drift row: {:?}", sim.rows);
    check(history(&sim), &[]);
}

#[test]
fn a_pending_episode_that_lasts_is_recorded_from_when_it_opened() {
    assert_eq!(RECORD_PENDING_AFTER_MS, 30_000);
    let mut sim = Sim::new();
    let stuck = stuck_service();
    sim.send("update", &stuck);
    sim.wait(29);
    assert!(sim.rows.is_empty());
    sim.wait(2);
    assert_eq!(sim.rows.len(), 1);
    assert_eq!(sim.rows[0].state, DriftState::Pending);
    assert_eq!(sim.rows[0].since, T0);
    check(history(&sim), &["none→pending generation_lag @0"]);
    sim.wait(10);
    assert_eq!(sim.rows.len(), 1, "recorded once");
    sim.send("update", &caught_up(&stuck));
    check(
        history(&sim),
        &[
            "none→pending generation_lag @0",
            "pending→resolved generation_lag @41",
        ],
    );
    assert_eq!(sim.rows.last().unwrap().state, DriftState::Resolved);
}

#[test]
fn a_drift_that_fires_before_it_was_recorded_gets_its_whole_history() {
    let mut sim = Sim::with_rules("classes:\n  generation_lag:\n    grace: 10s\n");
    let stuck = stuck_service();
    sim.send("update", &stuck);
    sim.wait(11);
    sim.send("update", &caught_up(&stuck));
    check(
        history(&sim),
        &[
            "none→pending generation_lag @0",
            "pending→firing generation_lag @11",
            "firing→resolved generation_lag @11",
        ],
    );
    let states: Vec<DriftState> = sim.rows.iter().map(|row| row.state).collect();
    assert_eq!(states, [DriftState::Firing, DriftState::Resolved]);
}

#[test]
fn an_episode_about_a_change_is_recorded_at_once() {
    // manual_edit cannot be found again from the state alone, so even with a grace its pending
    // drift is written when it opens.
    let mut sim = Sim::with_rules("classes:\n  manual_edit:\n    grace: 10m\n");
    let original = service();
    sim.send("add", &original);
    let edited = changed(&original, |s| {
        s["spec"]["template"]["spec"]["timeoutSeconds"] = json!(30);
        written_by(
            s,
            "kubectl-edit",
            "Update",
            json!({"f:spec": {"f:template": {"f:spec": {"f:timeoutSeconds": {}}}}}),
            "2023-10-09T21:45:00Z",
        );
    });
    sim.send("update", &edited);
    check(sim.lines(), &["pending manual_edit Service/knative-webapp"]);
    check(history(&sim), &["none→pending manual_edit @0"]);
    assert_eq!(sim.rows.len(), 1);
}

#[test]
fn a_pending_episode_lost_in_a_restart_opens_again_and_fires_with_no_event() {
    let mut sim = Sim::new();
    sim.send("update", &stuck_service());
    sim.wait(10);
    sim.restart();
    // The first round after the restart re-assesses the restored objects.
    sim.wait(1);
    sim.wait(299);
    check(
        sim.lines(),
        &[
            "pending generation_lag Service/knative-webapp",
            "pending generation_lag Service/knative-webapp",
        ],
    );
    sim.wait(2);
    assert_eq!(
        sim.last("generation_lag").drift.state,
        DriftState::Firing,
        "{:?}",
        sim.lines()
    );
    // Its grace counted from the re-assessment, 11 s after the lost one opened.
    assert_eq!(sim.last("generation_lag").drift.since, T0 + 11_000);
}

#[test]
fn a_recorded_pending_episode_survives_a_restart_with_its_since() {
    let mut sim = Sim::new();
    sim.send("update", &stuck_service());
    sim.wait(40);
    sim.restart();
    fires_after_restart_at(&mut sim, 300);
    assert_eq!(sim.last("generation_lag").drift.since, T0);
}

#[test]
fn a_failed_commit_records_the_lasting_episode_again_in_the_next_round() {
    let mut sim = Sim::new();
    sim.send("update", &stuck_service());
    let failed = sim.wait_and_fail_commit(31);
    assert_eq!(failed.drifts.len(), 1, "the round meant to record it");
    assert!(sim.rows.is_empty());
    sim.wait(1);
    assert_eq!(sim.rows.len(), 1, "recorded by the next round");
    check(history(&sim), &["none→pending generation_lag @0"]);
}

#[test]
fn a_graceful_stop_records_pending_drifts_so_a_restart_keeps_their_grace() {
    let mut sim = Sim::new();
    sim.send("update", &stuck_service());
    sim.wait(10);
    sim.stop_gracefully();
    check(history(&sim), &["none→pending generation_lag @0"]);
    sim.restart();
    fires_after_restart_at(&mut sim, 300);
}

#[test]
fn enabling_a_class_by_hot_reload_finds_conditions_that_already_hold() {
    let mut sim = Sim::with_rules("classes:\n  generation_lag:\n    enabled: false\n");
    sim.send("update", &stuck_service());
    sim.wait(60);
    check(sim.lines(), &[]);
    sim.reload("{}");
    sim.wait(1);
    check(
        sim.lines(),
        &["pending generation_lag Service/knative-webapp"],
    );
    sim.wait(300);
    assert_eq!(sim.last("generation_lag").drift.state, DriftState::Firing);
}

#[test]
fn re_enabled_image_drift_finds_a_workload_running_another_image_through_status_churn() {
    let mut sim = Sim::with_rules("classes:\n  image_drift:\n    enabled: false\n");
    sim.send("add", &revision());
    let deployment = deployment();
    sim.send("add", &deployment);
    let mut wrong = changed(&deployment, |d| {
        d["spec"]["template"]["spec"]["containers"][0]["image"] =
            json!("docker.io/attacker/webapp:latest");
    });
    sim.send("update", &wrong);
    sim.wait(120);
    sim.reload("{}");
    // Only status churn follows: the workload's spec is as it was.
    for replicas in [2, 1] {
        wrong = changed(&wrong, |d| d["status"]["replicas"] = json!(replicas));
        sim.send("update", &wrong);
    }
    sim.wait(61);
    let fired: Vec<String> = sim
        .notified()
        .into_iter()
        .filter(|line| line.contains("image_drift"))
        .collect();
    check(
        fired,
        &["firing image_drift Deployment/knative-webapp-00001-deployment"],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_records_pending_drifts_when_it_stops() {
    let app = crate::support::app();
    let failed: serde_json::Value = crate::support::fixture_yaml(
        "serving/redhat-developer-vscode-knative__test-servingTree-singleServiceFailedRevisionRevisionList.yaml",
    )["items"][0]
        .clone();
    let request = crate::support::binary_request(&crate::support::structured_event(
        "failed-1", "add", &failed,
    ));
    let status = app.router.clone().oneshot(request).await.unwrap().status();
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(
        app.store.drifts().is_empty(),
        "a fresh pending drift lives in memory: {:?}",
        app.store.drifts()
    );
    app.pipeline.shutdown();
    let mut drifts = Vec::new();
    for _ in 0..200 {
        drifts = app.store.drifts();
        if !drifts.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(
        drifts
            .iter()
            .any(|drift| drift.class == "not_ready" && drift.state == DriftState::Pending),
        "{drifts:?}"
    );
    assert!(drifts
        .iter()
        .all(|drift| drift.state == DriftState::Pending));
}

#[test]
fn restored_objects_share_their_managers_names() {
    // The engine keeps one copy of each field manager's name for every object (issue 28's
    // interned stamps); states restored after a restart share them too.
    let mut sim = Sim::new();
    let first = service();
    let second = changed(&first, |s| {
        s["metadata"]["name"] = json!("knative-webapp-2");
        s["metadata"]["uid"] = json!("2f4e6a3c-0000-4000-8000-000000000002");
    });
    sim.send("add", &first);
    sim.send("add", &second);
    sim.wait(1);
    let shared = |sim: &Sim| {
        let objects: Vec<_> = sim.engine().graph().iter().collect();
        assert_eq!(objects.len(), 2);
        let (a, b) = (&objects[0].managers, &objects[1].managers);
        assert!(!a.is_empty());
        assert_eq!(a.len(), b.len());
        a.iter().zip(b).all(|(a, b)| {
            std::sync::Arc::ptr_eq(&a.manager, &b.manager)
                && std::sync::Arc::ptr_eq(&a.operation, &b.operation)
                && std::sync::Arc::ptr_eq(&a.subresource, &b.subresource)
        })
    };
    assert!(shared(&sim), "objects built from events share names");
    // Restored as the writer restores them: from the stored rows' text.
    for object in sim.objects.values_mut() {
        let body = drift_core::classify::stored::encode(object).unwrap();
        *object = drift_core::classify::stored::decode(&body).unwrap();
    }
    sim.restart();
    assert!(shared(&sim), "restored objects share names");
}
