//! Fight detection through the pipeline (the writer's remediator and the engine's
//! `remediation_fight` class, with the sender's claim and outcome played by the test): after
//! each applied revert the same manager sets the same fields back;
//! the `fight.times`-th set-back stops remediation on the object (the attempt is refused as a
//! fight) and opens a critical `remediation_fight` naming the other manager, in the same round;
//! when the object's drift resolves, the fight ends and the finding resolves.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::scenario::*;
use crate::support::structured_event;
use drift_model::remediation::Outcome;
use drift_model::DriftState;
use drift_store::AuditRead;

const START: i64 = 1_796_472_000_000; // 2026-12-05T12:00:00Z

fn policy() -> drift_core::remediate::Policy {
    policy_in("apply")
}

fn policy_in(mode: &str) -> drift_core::remediate::Policy {
    let config = drift_core::config::load_str(
        &format!("defaultCluster: test\nremediation:\n  mode: {mode}\n  fight: {{times: 3, within: 1h}}\n  rules:\n  - name: revert-hand-edits\n    match: {{classes: [manual_edit], kinds: [Service.serving.knative.dev]}}\n    action: revert\n    approval: auto\n    cooldown: 1m\n"),
        &|_| None,
    )
    .unwrap();
    config
        .remediation
        .compile(&config.resync, &config.default_cluster)
        .unwrap()
}

async fn post(app: &crate::support::TestApp, id: &str, verb: &str, object: &Value) {
    use tower::ServiceExt;
    let response = app
        .router
        .clone()
        .oneshot(crate::support::structured_request(&structured_event(
            id, verb, object,
        )))
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
}

/// `object` with the traffic split 90/10 by `manager`.
fn split(object: &Value, manager: &str, time: &str) -> Value {
    changed(object, |s| {
        s["spec"]["traffic"] = json!([{"latestRevision": true, "percent": 90}, {"revisionName": "knative-webapp-00000", "percent": 10}]);
        written_by(
            s,
            manager,
            "Update",
            json!({"f:spec": {"f:traffic": {}}}),
            time,
        );
    })
}

/// `object` with the traffic of `original`, written by `manager`.
fn put_back(object: &Value, original: &Value, manager: &str, time: &str) -> Value {
    changed(object, |s| {
        s["spec"]["traffic"] = original["spec"]["traffic"].clone();
        written_by(
            s,
            manager,
            "Update",
            json!({"f:spec": {"f:traffic": {}}}),
            time,
        );
    })
}

/// What the sender does with the one planned attempt: claims it, and `between` (its write
/// landing, the event that shows it) happens before it keeps the outcome as applied.
async fn send_planned<F: std::future::Future<Output = ()>>(
    app: &crate::support::TestApp,
    between: F,
) {
    use drift_sentinel::pipeline::{SenderAnswer, SenderStep};
    let planned = app
        .store
        .remediations_by_outcome(Outcome::Planned, "test", 10)
        .unwrap();
    assert_eq!(planned.len(), 1, "{planned:?}");
    let (seq, attempt) = planned[0].clone();
    let step = |step: SenderStep| {
        let pipeline = app.pipeline.clone();
        async move {
            let receiver = tokio::task::spawn_blocking(move || pipeline.sender_step(step))
                .await
                .unwrap()
                .unwrap();
            receiver.await.unwrap().unwrap()
        }
    };
    let SenderAnswer::Send(mut sending) = step(SenderStep::Claim {
        seq,
        attempt: Box::new(attempt),
    })
    .await
    else {
        panic!("the attempt is claimed");
    };
    between.await;
    sending.outcome = Outcome::Applied;
    sending.status = Some(200);
    assert_eq!(
        step(SenderStep::Settle {
            seq,
            attempt: sending
        })
        .await,
        SenderAnswer::Settled
    );
}

fn of_class(app: &crate::support::TestApp, class: &str) -> Vec<drift_model::Drift> {
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
async fn the_third_set_back_stops_remediation_and_raises_a_fight_that_ends_with_the_drift() {
    let now = Arc::new(AtomicI64::new(START));
    let clock = Arc::clone(&now);
    let app = crate::support::app_with_remediation(
        Arc::new(move || clock.load(Ordering::SeqCst)),
        policy(),
    );
    let original = service();
    post(&app, "add", "add", &original).await;
    let mut object = original.clone();
    for round in 0..4 {
        // Two minutes apart: past the rule's one-minute cooldown, within the fight's hour.
        now.fetch_add(120_000, Ordering::SeqCst);
        let time = format!("2026-12-05T12:{:02}:00Z", 2 * round + 2);
        object = split(&object, "flux", &time);
        post(&app, &format!("edit-{round}"), "update", &object).await;
        if round < 3 {
            // The sender's part: the attempt is claimed and applied, and drift-sentinel's write
            // puts the traffic back.
            // The event that shows the revert (which resolves the drift) may come before the
            // sender keeps the outcome: the revert counts for fights all the same.
            now.fetch_add(1_000, Ordering::SeqCst);
            object = put_back(&object, &original, "drift-sentinel", &time);
            let shown = object.clone();
            let app_ref = &app;
            send_planned(&app, async move {
                post(app_ref, &format!("revert-{round}"), "update", &shown).await;
            })
            .await;
        }
    }
    let edits = of_class(&app, "manual_edit");
    assert_eq!(edits.len(), 4, "one episode per edit");
    let outcomes: Vec<(Outcome, Option<String>)> = edits
        .iter()
        .map(|drift| {
            let attempts = app.store.remediations(&drift.id).unwrap();
            assert_eq!(attempts.len(), 1, "{attempts:?}");
            (attempts[0].outcome, attempts[0].reason.clone())
        })
        .collect();
    assert_eq!(
        outcomes,
        vec![
            (Outcome::Applied, None),
            (Outcome::Applied, None),
            (Outcome::Applied, None),
            (Outcome::Refused, Some("fight".to_string())),
        ]
    );
    let fights = of_class(&app, "remediation_fight");
    assert_eq!(fights.len(), 1, "{fights:?}");
    let fight = &fights[0];
    assert_eq!(fight.state, DriftState::Firing);
    assert_eq!(fight.severity, drift_model::Severity::Critical);
    assert_eq!(fight.uid, edits[3].uid);
    assert_eq!(
        fight.evidence.facts.get("manager").map(String::as_str),
        Some("flux")
    );
    assert!(
        fight.evidence.summary.contains("flux"),
        "{}",
        fight.evidence.summary
    );

    now.fetch_add(120_000, Ordering::SeqCst);
    // Someone settles it (the other writer's owner puts the value back): the drift resolves,
    // the fight ends, and remediation may act on the object again.
    object = put_back(&object, &original, "kubectl-edit", "2026-12-05T12:12:00Z");
    post(&app, "settled", "update", &object).await;
    let fight = of_class(&app, "remediation_fight").remove(0);
    assert_eq!(fight.state, DriftState::Resolved, "{fight:?}");
    now.fetch_add(120_000, Ordering::SeqCst);
    object = split(&object, "kubectl-edit", "2026-12-05T12:14:00Z");
    post(&app, "edit-after", "update", &object).await;
    let last = of_class(&app, "manual_edit").pop().unwrap();
    let attempts = app.store.remediations(&last.id).unwrap();
    assert_eq!(attempts[0].outcome, Outcome::Planned, "{attempts:?}");
}

#[tokio::test]
async fn reverts_that_were_never_applied_make_no_fight() {
    // A dry run puts nothing back: a person editing the traffic back and forth is no fight.
    let now = Arc::new(AtomicI64::new(START));
    let clock = Arc::clone(&now);
    let app = crate::support::app_with_remediation(
        Arc::new(move || clock.load(Ordering::SeqCst)),
        policy_in("dryRun"),
    );
    let original = service();
    post(&app, "add", "add", &original).await;
    let mut object = original.clone();
    for round in 0..4 {
        now.fetch_add(120_000, Ordering::SeqCst);
        let time = format!("2026-12-05T12:{:02}:00Z", 2 * round + 2);
        object = split(&object, "kubectl-edit", &time);
        post(&app, &format!("edit-{round}"), "update", &object).await;
        now.fetch_add(1_000, Ordering::SeqCst);
        object = put_back(&object, &original, "kubectl-edit", &time);
        post(&app, &format!("undo-{round}"), "update", &object).await;
    }
    let edits = of_class(&app, "manual_edit");
    assert_eq!(edits.len(), 4);
    for drift in &edits {
        let attempts = app.store.remediations(&drift.id).unwrap();
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].outcome, Outcome::DryRun, "{attempts:?}");
    }
    assert_eq!(of_class(&app, "remediation_fight"), Vec::new());
}
