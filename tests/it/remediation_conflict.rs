//! Remediation's sender and a `409 Conflict` (the real binary against the scripted fake API
//! server): with no newer version seen the conflict is the outcome and nothing is sent again;
//! after Knative's status write (a newer version whose only change is its status) the same
//! revert goes again on that version; a change besides the status ends the attempt.

use serde_json::{json, Value};

use crate::fake_apiserver::{list, Expect, FakeApiServer};
use crate::remediation_process::{namespace_read, revert_body, start, MERGE, PATH};
use crate::resync::SERVICES;
use crate::resync_api::until;
use crate::scenario::*;

/// What the fake API server expects up to the first send, answered `409`, then `rest`.
async fn conflicted(original: &Value, edited: &Value, rest: Vec<Expect>) -> FakeApiServer {
    let mut script = vec![
        Expect::get(
            SERVICES,
            &[("limit", "500")],
            list("Service", "90000", None, std::slice::from_ref(original)),
        ),
        namespace_read("myapp", json!({})),
        Expect::write(
            "PATCH",
            PATH,
            &[("fieldManager", "drift-sentinel")],
            (MERGE, revert_body(original, edited)),
            409,
            conflict_status(),
        ),
    ];
    script.extend(rest);
    FakeApiServer::start(script).await
}

/// The binary on `fake`, once the edit's revert was sent the first time.
async fn after_the_first_send(
    fake: &FakeApiServer,
    dir: &std::path::Path,
    edited: &Value,
) -> crate::remediation_process::Running {
    let mut running = start(fake, dir).await;
    running.send("update", edited).await;
    until("the first send", &running.log, || async {
        (fake.writes().len() == 1).then_some(())
    })
    .await;
    running
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_with_no_newer_version_seen_ends_the_attempt_without_a_second_request() {
    let original = service();
    let edited = traffic_split(&original);
    let fake = conflicted(&original, &edited, Vec::new()).await;
    let dir = tempfile::tempdir().unwrap();
    let running = after_the_first_send(&fake, dir.path(), &edited).await;
    let detail = running
        .drift_when("the conflict to be recorded", |detail| {
            detail["remediations"][0]["outcome"] == "conflict"
        })
        .await;
    let attempt = &detail["remediations"][0];
    assert_eq!(attempt["status"], 409);
    assert_eq!(attempt["reason"], "conflict");
    assert!(
        attempt["detail"]
            .as_str()
            .unwrap()
            .contains("the object has been modified"),
        "{attempt}"
    );
    assert_eq!(detail["drift"]["state"], "firing");
    assert_eq!(detail["remediations"].as_array().unwrap().len(), 1);
    // Nothing is sent again: the one write is all the fake server saw.
    assert_eq!(fake.writes().len(), 1, "{:?}", fake.writes());
    fake.verify();
}

fn conflict_status() -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Operation cannot be fulfilled on services.serving.knative.dev \"knative-webapp\": the object has been modified; please apply your changes to the latest version and try again",
        "reason": "Conflict", "details": {"name": "knative-webapp", "group": "serving.knative.dev", "kind": "services"},
        "code": 409,
    })
}

/// Knative's controller writes the Service's status right after each change of it: an attempt
/// planned on the edited version meets a `409`, and is sent again on the version after the
/// status write once that event arrives; a change besides the status ends it instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_after_a_status_write_is_sent_again_on_the_newer_version_and_another_change_ends_it(
) {
    let original = service();
    let edited = traffic_split(&original);
    let reconciled = changed(&edited, |s| {
        s["status"]["observedGeneration"] = json!(99);
        s["metadata"]["managedFields"]
            .as_array_mut()
            .unwrap()
            .push(json!({"manager": "controller", "operation": "Update", "apiVersion": "serving.knative.dev/v1",
                         "time": "2026-12-05T09:00:01Z", "fieldsType": "FieldsV1", "subresource": "status",
                         "fieldsV1": {"f:status": {"f:observedGeneration": {}}}}));
    });
    let restored = changed(&reconciled, |s| {
        s["spec"]["traffic"] = original["spec"]["traffic"].clone();
    });
    let fake = conflicted(
        &original,
        &edited,
        vec![
            // The opt-out is read again before the second write.
            namespace_read("myapp", json!({})),
            Expect::write(
                "PATCH",
                PATH,
                &[("fieldManager", "drift-sentinel")],
                (MERGE, revert_body(&original, &reconciled)),
                200,
                restored.clone(),
            ),
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut running = after_the_first_send(&fake, dir.path(), &edited).await;
    running.send("update", &reconciled).await;
    let detail = running
        .drift_when("the revert to be applied", |detail| {
            detail["remediations"][0]["outcome"] == "applied"
        })
        .await;
    let attempt = &detail["remediations"][0];
    assert_eq!(attempt["status"], 200);
    assert_eq!(
        attempt["resourceVersion"], reconciled["metadata"]["resourceVersion"],
        "{attempt}"
    );
    assert_eq!(detail["remediations"].as_array().unwrap().len(), 1);
    assert_eq!(fake.writes().len(), 2, "{:?}", fake.writes());
    fake.verify();

    // Someone edits the spec again after the 409: a newer change besides the status is a new
    // judgement's business, never this attempt's second request.
    let fake = conflicted(&original, &edited, Vec::new()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut running = after_the_first_send(&fake, dir.path(), &edited).await;
    let edited_again = changed(&edited, |s| {
        s["spec"]["template"]["metadata"]["annotations"] = json!({"team": "edited again"});
    });
    running.send("update", &edited_again).await;
    let detail = running
        .drift_when("the attempt to end", |detail| {
            detail["remediations"][0]["outcome"] == "conflict"
        })
        .await;
    let attempt = &detail["remediations"][0];
    assert_eq!(attempt["reason"], "moved_on", "{attempt}");
    assert!(
        attempt["detail"]
            .as_str()
            .unwrap()
            .starts_with("answered 409 Conflict, then: "),
        "{attempt}"
    );
    assert_eq!(fake.writes().len(), 1, "{:?}", fake.writes());
    fake.verify();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_that_opts_out_between_the_conflict_and_the_second_send_is_not_written() {
    let original = service();
    let edited = traffic_split(&original);
    let reconciled = changed(&edited, |s| {
        s["status"]["observedGeneration"] = json!(99);
    });
    let fake = conflicted(
        &original,
        &edited,
        vec![namespace_read(
            "myapp",
            json!({drift_core::remediate::OPT_OUT: "off"}),
        )],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut running = after_the_first_send(&fake, dir.path(), &edited).await;
    running.send("update", &reconciled).await;
    let detail = running
        .drift_when("the attempt to be refused", |detail| {
            detail["remediations"][0]["outcome"] == "refused"
        })
        .await;
    assert_eq!(detail["remediations"][0]["reason"], "opted_out", "{detail}");
    assert_eq!(fake.writes().len(), 1, "{:?}", fake.writes());
    fake.verify();
}
