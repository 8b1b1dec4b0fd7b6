//! Remediation in the running service (real HTTP, real SQLite file, the config as a user writes
//! it): a drift that fires gets its attempt recorded with the round that fired it, shown in the
//! drift's history (`GET /api/v1/drifts/{id}`) and on its dashboard page, counted in the metrics;
//! the rails hold across drifts; `mode: off` records nothing.

use serde_json::{json, Value};

use crate::api::Running;
use crate::scenario::*;
use crate::support::structured_event;

const DRY_RUN: &str = "remediation:\n  mode: dryRun\n  rules:\n  - name: revert-hand-edits\n    match: {classes: [manual_edit, config_drift], kinds: [Service.serving.knative.dev, ConfigMap]}\n    action: revert\n    approval: auto\n    cooldown: 10m\n";

/// A hand edit of `config-autoscaler`: `min-scale: "2"` by kubectl-edit.
fn min_scale_edit(base: &Value) -> Value {
    changed(base, |c| {
        c["data"]["min-scale"] = json!("2");
        written_by(
            c,
            "kubectl-edit",
            "Update",
            json!({"f:data": {"f:min-scale": {}}}),
            "2026-12-05T09:00:00Z",
        );
    })
}

/// The ids of the drifts of `class`, newest first.
async fn drift_ids(app: &Running, class: &str) -> Vec<String> {
    let (status, page) = app.get(&format!("/api/v1/drifts?class={class}")).await;
    assert_eq!(status, 200, "{page}");
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap().to_string())
        .collect()
}

async fn remediations_of(app: &Running, id: &str) -> Vec<Value> {
    let (status, detail) = app.get(&format!("/api/v1/drifts/{id}")).await;
    assert_eq!(status, 200, "{detail}");
    detail["remediations"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_dry_run_records_the_exact_revert_with_the_firing_and_the_rails_hold_after_it() {
    let mut app = Running::start(DRY_RUN).await;
    let original = service();
    app.send("add", &original).await;
    let edited = traffic_split(&original);
    app.send("update", &edited).await;
    let ids = drift_ids(&app, "manual_edit").await;
    assert_eq!(ids.len(), 1, "{ids:?}");
    let attempts = remediations_of(&app, &ids[0]).await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    let attempt = &attempts[0];
    assert_eq!(attempt["mode"], "dryRun");
    assert_eq!(attempt["action"], "revert");
    assert_eq!(attempt["rule"], "revert-hand-edits");
    assert_eq!(attempt["outcome"], "dryRun");
    assert_eq!(attempt["approvedBy"], Value::Null);
    let version = edited["metadata"]["resourceVersion"].clone();
    assert_eq!(attempt["resourceVersion"], version);
    let request = &attempt["request"];
    assert_eq!(request["method"], "PATCH");
    assert_eq!(
        request["path"],
        "/apis/serving.knative.dev/v1/namespaces/myapp/services/knative-webapp?fieldManager=drift-sentinel"
    );
    assert_eq!(request["contentType"], "application/merge-patch+json");
    assert_eq!(
        request["body"],
        json!({"metadata": {"resourceVersion": version}, "spec": {"traffic": original["spec"]["traffic"]}})
    );
    // Applied as the API server would (RFC 7386), the patch puts the spec back.
    let mut patched = edited.clone();
    crate::support::merge(&mut patched, &request["body"]);
    assert_eq!(patched["spec"], original["spec"]);

    // On the drift's page too.
    let (status, page) = app.text(&format!("/ui/drifts/{}", ids[0])).await;
    assert_eq!(status, 200);
    assert!(page.contains("<table id=\"remediations\">"), "{page}");
    assert!(page.contains("revert-hand-edits"), "{page}");

    // Counted once.
    let (_, metrics) = app.text("/metrics").await;
    assert!(
        metrics.contains(
            "drift_sentinel_remediations_total{action=\"revert\",outcome=\"dryRun\"} 1\n"
        ),
        "{metrics}"
    );

    // The object put back (by a person here) resolves the drift; the attempt is not decided
    // again.
    let restored = changed(&edited, |s| {
        s["spec"]["traffic"] = original["spec"]["traffic"].clone();
        written_by(
            s,
            "kubectl-edit",
            "Update",
            json!({"f:spec": {"f:traffic": {}}}),
            "2026-12-05T09:01:00Z",
        );
    });
    app.send("update", &restored).await;
    let (_, detail) = app.get(&format!("/api/v1/drifts/{}", ids[0])).await;
    assert_eq!(detail["drift"]["state"], "resolved", "{detail}");
    assert_eq!(remediations_of(&app, &ids[0]).await.len(), 1);

    // The same edit again within the rule's cooldown: a new episode fires, and its attempt is
    // refused by the cooldown (the dry run counts as the action it stands for).
    let again = traffic_split(&restored);
    app.send("update", &again).await;
    let ids = drift_ids(&app, "manual_edit").await;
    assert_eq!(ids.len(), 2, "{ids:?}");
    let attempts = remediations_of(&app, &ids[0]).await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0]["outcome"], "refused");
    assert_eq!(attempts[0]["reason"], "cooldown");
    assert_eq!(attempts[0]["request"], Value::Null);
    assert!(
        attempts[0]["detail"].as_str().unwrap().contains("cooldown"),
        "{attempts:?}"
    );
    let (_, metrics) = app.text("/metrics").await;
    assert!(
        metrics.contains(
            "drift_sentinel_remediations_total{action=\"revert\",outcome=\"refused\"} 1\n"
        ),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_config_drift_is_planned_and_a_drift_no_rule_takes_gets_nothing() {
    let mut app = Running::start(DRY_RUN).await;
    let base = config_autoscaler();
    app.send("add", &base).await;
    let edited = min_scale_edit(&base);
    app.send("update", &edited).await;
    let ids = drift_ids(&app, "config_drift").await;
    assert_eq!(ids.len(), 1, "{ids:?}");
    let attempts = remediations_of(&app, &ids[0]).await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0]["outcome"], "dryRun");
    let body = &attempts[0]["request"]["body"];
    assert_eq!(
        body["data"]["min-scale"],
        base["data"]
            .get("min-scale")
            .cloned()
            .unwrap_or(Value::Null),
        "{body}"
    );
    // The edit is a config drift only (a ConfigMap has no Knative-managed spec): one attempt.
    assert_eq!(drift_ids(&app, "manual_edit").await, Vec::<String>::new());
}

/// Sends `event` to the test app and returns the status.
async fn post(app: &crate::support::TestApp, event: &Value) -> u16 {
    use tower::ServiceExt;
    let response = app
        .router
        .clone()
        .oneshot(crate::support::structured_request(event))
        .await
        .unwrap();
    response.status().as_u16()
}

#[tokio::test]
async fn a_round_whose_commit_fails_leaves_the_rails_as_they_were() {
    use drift_store::AuditRead;
    // A budget of one action: had the failed round's attempt been counted, the retried round's
    // would be refused.
    // The test app files its events under the cluster `test`.
    let config = drift_core::config::load_str(
        &format!("defaultCluster: test\n{}", DRY_RUN)
            .replace("  rules:", "  budget: {actions: 1, per: 1h}\n  rules:"),
        &|_| None,
    )
    .unwrap();
    let policy = config
        .remediation
        .compile(&config.resync, &config.default_cluster)
        .unwrap();
    let app = crate::support::app_with_remediation(drift_model::time::system_clock(), policy);
    let original = service();
    assert_eq!(
        post(&app, &structured_event("add", "add", &original)).await,
        202
    );
    let edit = structured_event("edit", "update", &traffic_split(&original));
    // The commit fails (it did not land, and the writer learns so), after the round decided.
    app.store.set_lost_commit_answers(Some(false));
    assert_eq!(post(&app, &edit).await, 503);
    app.store.set_lost_commit_answers(None);
    assert_eq!(post(&app, &edit).await, 202, "the Broker's retry");
    let drifts: Vec<_> = app
        .store
        .drifts()
        .into_iter()
        .filter(|drift| drift.class == "manual_edit")
        .collect();
    assert_eq!(drifts.len(), 1);
    let attempts = app.store.remediations(&drifts[0].id).unwrap();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(
        attempts[0].outcome,
        drift_model::remediation::Outcome::DryRun,
        "{attempts:?}"
    );
}

#[tokio::test]
async fn mode_off_records_nothing_whatever_fires() {
    let mut app = Running::start(&DRY_RUN.replace("mode: dryRun", "mode: off")).await;
    let original = service();
    app.send("add", &original).await;
    app.send("update", &traffic_split(&original)).await;
    let base = config_autoscaler();
    app.send("add", &base).await;
    app.send("update", &min_scale_edit(&base)).await;
    let (_, page) = app.get("/api/v1/drifts").await;
    let items = page["items"].as_array().unwrap();
    assert!(items.len() >= 2, "{page}");
    for item in items {
        let id = item["id"].as_str().unwrap();
        assert_eq!(remediations_of(&app, id).await, Vec::<Value>::new(), "{id}");
    }
    let (_, metrics) = app.text("/metrics").await;
    assert!(
        !metrics.contains("drift_sentinel_remediations_total{"),
        "{metrics}"
    );
}

const MANUAL: &str = "remediation:\n  mode: dryRun\n  rules:\n  - name: approve-reverts\n    match: {classes: [manual_edit], kinds: [Service.serving.knative.dev]}\n    action: revert\n    approval: manual\n  - name: auto-configmaps\n    match: {classes: [config_drift]}\n    action: revert\n    approval: auto\n";

async fn approve(app: &Running, id: &str, body: Value) -> (u16, Value) {
    let response = app
        .client
        .post(format!("{}/api/v1/drifts/{id}/remediate", app.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_manual_rule_records_nothing_until_a_person_approves_through_the_api() {
    let mut app = Running::start(MANUAL).await;
    let original = service();
    app.send("add", &original).await;
    let edited = traffic_split(&original);
    app.send("update", &edited).await;
    let ids = drift_ids(&app, "manual_edit").await;
    assert_eq!(ids.len(), 1);
    let id = &ids[0];
    assert_eq!(remediations_of(&app, id).await, Vec::<Value>::new());

    // Mistakes are named and record nothing.
    let (status, error) = approve(&app, id, json!({"action": "revert"})).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (400, Some("invalid_approval")),
        "{error}"
    );
    let (status, error) = approve(&app, id, json!({"action": "undo", "approvedBy": "alice"})).await;
    assert_eq!(status, 400, "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .starts_with("action: expected revert"),
        "{error}"
    );
    let (status, error) = approve(&app, id, json!({"action": "revert", "approvedBy": "  "})).await;
    assert_eq!(status, 400, "{error}");
    let (status, error) = approve(
        &app,
        id,
        json!({"action": "revert", "approvedBy": "alice", "force": true}),
    )
    .await;
    assert_eq!(status, 400, "{error}");
    let (status, error) = approve(
        &app,
        "nope",
        json!({"action": "revert", "approvedBy": "alice"}),
    )
    .await;
    assert_eq!(
        (status, error["code"].as_str()),
        (404, Some("not_found")),
        "{error}"
    );
    let (status, error) = approve(
        &app,
        id,
        json!({"action": "rollback", "approvedBy": "alice"}),
    )
    .await;
    assert_eq!(
        (status, error["code"].as_str()),
        (403, Some("not_allowed")),
        "{error}"
    );
    assert!(
        error["message"].as_str().unwrap().contains("offers revert"),
        "{error}"
    );
    assert_eq!(remediations_of(&app, id).await, Vec::<Value>::new());

    // The approval: decided and committed before the answer.
    let (status, body) = approve(
        &app,
        id,
        json!({"action": "revert", "approvedBy": "alice@example.com"}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let attempt = &body["attempt"];
    assert_eq!(attempt["approvedBy"], "alice@example.com");
    assert_eq!(attempt["outcome"], "dryRun");
    assert_eq!(attempt["rule"], "approve-reverts");
    let version = edited["metadata"]["resourceVersion"].clone();
    assert_eq!(
        attempt["request"]["body"],
        json!({"metadata": {"resourceVersion": version}, "spec": {"traffic": original["spec"]["traffic"]}})
    );
    let history = remediations_of(&app, id).await;
    assert_eq!(history, vec![attempt.clone()]);

    // A second approval right after: the rule's cooldown refuses it, and the refusal is kept.
    let (status, error) = approve(&app, id, json!({"action": "revert", "approvedBy": "bob"})).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (403, Some("refused")),
        "{error}"
    );
    let history = remediations_of(&app, id).await;
    assert_eq!(history.len(), 2);
    assert_eq!(history[1]["outcome"], "refused");
    assert_eq!(history[1]["reason"], "cooldown");
    assert_eq!(history[1]["approvedBy"], "bob");

    // Once the drift resolved, there is nothing to approve.
    let restored = changed(&edited, |s| {
        s["spec"]["traffic"] = original["spec"]["traffic"].clone();
    });
    app.send("update", &restored).await;
    let (status, error) =
        approve(&app, id, json!({"action": "revert", "approvedBy": "alice"})).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (409, Some("moved_on")),
        "{error}"
    );

    // An automatic rule's drift is not approved by hand: it decided when the drift fired.
    let base = config_autoscaler();
    app.send("add", &base).await;
    app.send("update", &min_scale_edit(&base)).await;
    let config = drift_ids(&app, "config_drift").await;
    let (status, error) = approve(
        &app,
        &config[0],
        json!({"action": "revert", "approvedBy": "alice"}),
    )
    .await;
    assert_eq!(
        (status, error["code"].as_str()),
        (403, Some("not_allowed")),
        "{error}"
    );
    assert!(
        error["message"].as_str().unwrap().contains("automatic"),
        "{error}"
    );
    assert_eq!(
        remediations_of(&app, &config[0]).await.len(),
        1,
        "its own attempt only"
    );
}

/// A test app that remediates in apply mode by [`DRY_RUN`]'s rules, on its cluster `test`.
fn apply_app() -> crate::support::TestApp {
    let config = drift_core::config::load_str(
        &format!(
            "defaultCluster: test\n{}",
            DRY_RUN.replace("mode: dryRun", "mode: apply")
        ),
        &|_| None,
    )
    .unwrap();
    let policy = config
        .remediation
        .compile(&config.resync, &config.default_cluster)
        .unwrap();
    crate::support::app_with_remediation(drift_model::time::system_clock(), policy)
}

/// An apply-mode test app after the fixture Service was added and its traffic edited by hand:
/// the app, the Service before and after the edit, and the one attempt planned for it.
async fn edited_in_apply_mode() -> (
    crate::support::TestApp,
    Value,
    Value,
    (i64, drift_model::remediation::Attempt),
) {
    use drift_store::AuditRead;
    let app = apply_app();
    let original = service();
    assert_eq!(
        post(&app, &structured_event("add", "add", &original)).await,
        202
    );
    let edited = traffic_split(&original);
    assert_eq!(
        post(&app, &structured_event("edit", "update", &edited)).await,
        202
    );
    let mut planned = app
        .store
        .remediations_by_outcome(drift_model::remediation::Outcome::Planned, "test", 10)
        .unwrap();
    assert_eq!(planned.len(), 1, "{planned:?}");
    let attempt = planned.remove(0);
    (app, original, edited, attempt)
}

/// The writer's answer to a sender step (the sender's side of `app/remediation.rs`).
async fn step(
    app: &crate::support::TestApp,
    step: drift_sentinel::pipeline::SenderStep,
) -> drift_sentinel::pipeline::SenderAnswer {
    let pipeline = app.pipeline.clone();
    let receiver = tokio::task::spawn_blocking(move || pipeline.sender_step(step))
        .await
        .unwrap()
        .unwrap();
    receiver.await.unwrap().unwrap()
}

#[tokio::test]
async fn a_planned_attempt_is_claimed_only_while_nothing_newer_was_seen() {
    use drift_model::remediation::Outcome;
    use drift_sentinel::pipeline::{SenderAnswer, SenderStep};
    use drift_store::AuditRead;
    let (app, original, edited, (seq, attempt)) = edited_in_apply_mode().await;

    // Knative writes the status after the edit: a newer resourceVersion, the same content.
    let status_write = changed(&edited, |s| {
        s["status"]["observedGeneration"] = json!(2);
    });
    assert_eq!(
        post(&app, &structured_event("status", "update", &status_write)).await,
        202
    );
    // Claimed: marked `sending`, and the request handed out on the newer version (a status
    // write does not end an attempt; the precondition follows it).
    let claimed = step(
        &app,
        SenderStep::Claim {
            seq,
            attempt: Box::new(attempt.clone()),
        },
    )
    .await;
    let SenderAnswer::Send(sending) = claimed else {
        panic!("claimed: {claimed:?}");
    };
    assert_eq!(sending.outcome, Outcome::Sending);
    let newer_version = status_write["metadata"]["resourceVersion"].clone();
    assert_eq!(sending.resource_version.as_deref(), newer_version.as_str());
    let body: Value = serde_json::from_str(&sending.request.as_ref().unwrap().body).unwrap();
    assert_eq!(
        body,
        json!({"metadata": {"resourceVersion": newer_version}, "spec": {"traffic": original["spec"]["traffic"]}})
    );
    assert!(app
        .store
        .remediations_by_outcome(Outcome::Planned, "test", 10)
        .unwrap()
        .is_empty());
    assert_eq!(
        app.store
            .remediations_by_outcome(Outcome::Sending, "test", 10)
            .unwrap()
            .len(),
        1
    );
    // Claimed once only: a second claim of the same attempt gets no request.
    let again = step(
        &app,
        SenderStep::Claim {
            seq,
            attempt: Box::new(attempt.clone()),
        },
    )
    .await;
    assert!(matches!(again, SenderAnswer::Ended(_)), "{again:?}");
    // Its outcome is kept; a late claim cannot move it back.
    let mut applied = *sending;
    applied.outcome = Outcome::Applied;
    applied.status = Some(200);
    assert_eq!(
        step(
            &app,
            SenderStep::Settle {
                seq,
                attempt: Box::new(applied.clone())
            }
        )
        .await,
        SenderAnswer::Settled
    );
    assert_eq!(
        app.store.remediations(&applied.drift_id).unwrap(),
        vec![applied.clone()]
    );

    // Another Service's edit, then a newer change of its spec before the claim: ended without
    // a request.
    let other = changed(&original, |s| {
        s["metadata"]["name"] = json!("knative-webapp-2");
        s["metadata"]["uid"] = json!("second-service-uid");
    });
    assert_eq!(
        post(&app, &structured_event("add-2", "add", &other)).await,
        202
    );
    let edited = traffic_split(&other);
    assert_eq!(
        post(&app, &structured_event("edit-2", "update", &edited)).await,
        202
    );
    let (seq, attempt) = app
        .store
        .remediations_by_outcome(Outcome::Planned, "test", 10)
        .unwrap()
        .remove(0);
    let newer = changed(&edited, |s| {
        s["spec"]["template"]["metadata"]["annotations"]["note"] = json!("later");
        written_by(
            s,
            "kubectl-edit",
            "Update",
            json!({"f:spec": {"f:template": {"f:metadata": {"f:annotations": {"f:note": {}}}}}}),
            "2026-12-05T09:02:00Z",
        );
    });
    assert_eq!(
        post(&app, &structured_event("newer", "update", &newer)).await,
        202
    );
    let ended = step(
        &app,
        SenderStep::Claim {
            seq,
            attempt: Box::new(attempt),
        },
    )
    .await;
    let SenderAnswer::Ended(ended) = ended else {
        panic!("ended: {ended:?}");
    };
    assert_eq!(ended.outcome, Outcome::Conflict);
    assert_eq!(ended.reason.as_deref(), Some("moved_on"));
    assert!(
        ended.detail.as_deref().unwrap().contains("a newer change"),
        "{ended:?}"
    );
    let kept = app.store.remediations(&ended.drift_id).unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].outcome, Outcome::Conflict);
}

#[tokio::test]
async fn a_claim_whose_commit_fails_can_be_claimed_again() {
    use drift_model::remediation::Outcome;
    use drift_sentinel::pipeline::{SenderAnswer, SenderStep};
    use drift_store::AuditRead;
    let (app, _, _, (seq, attempt)) = edited_in_apply_mode().await;
    let claim = || SenderStep::Claim {
        seq,
        attempt: Box::new(attempt.clone()),
    };
    // The claim's commit fails: the sender hears an error, nothing is claimed.
    app.store.set_failing(true);
    let pipeline = app.pipeline.clone();
    let step = claim();
    let failed = tokio::task::spawn_blocking(move || pipeline.sender_step(step))
        .await
        .unwrap()
        .unwrap()
        .await
        .unwrap();
    assert!(failed.is_err(), "{failed:?}");
    app.store.set_failing(false);
    assert_eq!(
        app.store
            .remediations_by_outcome(Outcome::Planned, "test", 10)
            .unwrap()
            .len(),
        1
    );
    // The next claim gets the request.
    assert!(matches!(
        step_of(&app, claim()).await,
        SenderAnswer::Send(_)
    ));
}

async fn step_of(
    app: &crate::support::TestApp,
    step: drift_sentinel::pipeline::SenderStep,
) -> drift_sentinel::pipeline::SenderAnswer {
    self::step(app, step).await
}

#[tokio::test]
async fn a_claim_is_refused_when_no_rule_asks_for_the_attempt_any_more() {
    use drift_model::remediation::Outcome;
    use drift_sentinel::pipeline::{SenderAnswer, SenderStep};
    let (app, _, _, (seq, mut attempt)) = edited_in_apply_mode().await;
    // Decided by a rule the section (after a restart) no longer has.
    attempt.rule = "removed-rule".into();
    let SenderAnswer::Ended(ended) = step_of(
        &app,
        SenderStep::Claim {
            seq,
            attempt: Box::new(attempt),
        },
    )
    .await
    else {
        panic!("not sent");
    };
    assert_eq!(
        (ended.outcome, ended.reason.as_deref()),
        (Outcome::Refused, Some("no_rule"))
    );
}

#[tokio::test]
async fn a_start_without_apply_ends_the_attempts_an_earlier_one_left_planned_or_in_flight() {
    use drift_model::remediation::{Attempt, Outcome};
    use drift_store::Batch;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("api.db");
    let options = drift_store::Options::Sqlite { path: path.clone() };
    let left = |drift_id: &str, outcome: Outcome| Attempt {
        drift_id: drift_id.into(),
        cluster: "test".into(),
        object: "serving.knative.dev/v1/Service/myapp/knative-webapp".into(),
        fields: vec!["/spec/traffic".into()],
        at: drift_model::time::system_clock()(),
        mode: "apply".into(),
        action: "revert".into(),
        rule: "revert-hand-edits".into(),
        approved_by: None,
        request: None,
        resource_version: Some("7".into()),
        judged: None,
        outcome,
        status: None,
        resource_version_after: None,
        reason: None,
        detail: None,
    };
    {
        // An earlier start in apply mode left one attempt planned and one in flight.
        let mut opened = drift_store::open(&options).unwrap();
        opened
            .writer
            .commit(&Batch {
                remediations: vec![left("a", Outcome::Planned), left("b", Outcome::Sending)],
                ..Batch::default()
            })
            .unwrap();
    }
    let store = format!("store:\n  path: {}\n", path.display());
    let app = Running::start_on(dir, &store, &format!("defaultCluster: test\n{DRY_RUN}")).await;
    let audit = drift_store::open(&options).unwrap().audit;
    let mut ended = Vec::new();
    for _ in 0..200 {
        ended = ["a", "b"]
            .iter()
            .map(|id| audit.remediations(id).unwrap().remove(0))
            .collect::<Vec<_>>();
        if ended
            .iter()
            .all(|attempt| !matches!(attempt.outcome, Outcome::Planned | Outcome::Sending))
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        (ended[0].outcome, ended[0].reason.as_deref()),
        (Outcome::Refused, Some("mode")),
        "{ended:?}"
    );
    assert_eq!(
        (ended[1].outcome, ended[1].reason.as_deref()),
        (Outcome::Failed, Some("unknown")),
        "{ended:?}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_repeated_step_changes_nothing_and_is_told_once() {
    use drift_model::remediation::Outcome;
    use drift_sentinel::pipeline::{SenderAnswer, SenderStep};
    use drift_store::AuditRead;
    let (app, _, _, (seq, attempt)) = edited_in_apply_mode().await;
    let SenderAnswer::Send(mut sent) = step_of(
        &app,
        SenderStep::Claim {
            seq,
            attempt: Box::new(attempt.clone()),
        },
    )
    .await
    else {
        panic!("claimed");
    };
    sent.outcome = Outcome::Applied;
    sent.status = Some(200);
    let settle = || SenderStep::Settle {
        seq,
        attempt: sent.clone(),
    };
    let deliveries = || app.store.deliveries_of(&sent.drift_id).unwrap().len();
    let outbox_before = deliveries();
    assert_eq!(step_of(&app, settle()).await, SenderAnswer::Settled);
    let told = deliveries() - outbox_before;
    assert!(told >= 1, "the outcome is told");
    // The sender's answer was lost and it settles again: nothing changes, nothing more is told.
    assert_eq!(step_of(&app, settle()).await, SenderAnswer::Settled);
    assert_eq!(deliveries() - outbox_before, told);
    assert_eq!(
        crate::support::metric(
            &app.metrics,
            "drift_sentinel_remediations_total{action=\"revert\",outcome=\"applied\"}"
        ),
        1.0
    );
    // A late claim of the settled row gets no request either.
    let late = step_of(
        &app,
        SenderStep::Claim {
            seq,
            attempt: Box::new(attempt),
        },
    )
    .await;
    assert!(
        matches!(&late, SenderAnswer::Ended(ended) if ended.outcome == Outcome::Applied),
        "{late:?}"
    );
    assert_eq!(
        app.store.remediations(&sent.drift_id).unwrap()[0].outcome,
        Outcome::Applied
    );
}
