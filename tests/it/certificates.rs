//! `certificate_expiring` in the engine, on the scenario's clock: a Knative Certificate and a
//! cert-manager Certificate judged by `status.notAfter` and the clock, again with no event when
//! a threshold passes, after a restart and at a resync pass; one alert for a Knative Certificate
//! and its cert-manager child. Objects: the derived Knative Certificate
//! (`tests/fixtures/knative/derived/certificate-ready.yaml`, `notAfter` 2024-01-07T20:36:49Z, a
//! 90-day certificate) and the cert-manager documentation's Certificate with the status of
//! cert-manager issue #7895 (`tests/fixtures/certificates/`, README there).

use serde_json::{json, Value};

use crate::scenario::*;
use crate::support::fixture_yaml;
use drift_model::{DriftState, Severity};

const DAY: i64 = 86_400;
/// `status.notAfter` of the derived Knative Certificate.
const NOT_AFTER: &str = "2024-01-07T20:36:49Z";

fn not_after_millis() -> i64 {
    drift_model::time::parse_time(NOT_AFTER).unwrap()
}

/// The ready Knative Certificate of the Route `myapp/knative-webapp`.
fn kcert() -> Value {
    changed(&derived("certificate-ready.yaml"), |_| {})
}

/// The cert-manager Certificate of the documentation (spec only) with the status cert-manager
/// issue #7895 printed (Ready=True, Issuing=True Renewing), its `notAfter` set to `not_after`.
fn cert_manager(not_after: &str) -> Value {
    let mut object = fixture_yaml(
        "../certificates/cert-manager-website__docs-usage-certificate__Certificate-example-com-spec-only.yaml",
    );
    let mut status = fixture_yaml(
        "../certificates/cert-manager-issue-7895__Certificate-status-expired-still-Ready.yaml",
    );
    status["notAfter"] = json!(not_after);
    object["status"] = status;
    // What the API server adds (the conditions' observedGeneration is 5).
    object["metadata"]["uid"] = json!("5b0c6a57-0c00-4e8e-9d2a-7c2d3f0e1a01");
    object["metadata"]["generation"] = json!(5);
    object["metadata"]["creationTimestamp"] = json!("2025-05-04T13:50:00Z");
    changed(&object, |_| {})
}

/// `kcert`'s cert-manager child, as Knative's certificate reconciler makes it: same name and
/// namespace, controller-owned by the Knative Certificate.
fn child_of(kcert: &Value, not_after: &str) -> Value {
    changed(&cert_manager(not_after), |c| {
        c["metadata"]["uid"] = json!("5b0c6a57-0c01-4e8e-9d2a-7c2d3f0e1a02");
        c["metadata"]["name"] = kcert["metadata"]["name"].clone();
        c["metadata"]["namespace"] = kcert["metadata"]["namespace"].clone();
        c["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "networking.internal.knative.dev/v1alpha1",
            "kind": "Certificate",
            "name": kcert["metadata"]["name"],
            "uid": kcert["metadata"]["uid"],
            "controller": true,
            "blockOwnerDeletion": true,
        }]);
    })
}

/// What users are told (`Sim::notified`), with each drift's API group: a Knative Certificate
/// and its cert-manager child share kind and name.
fn told(sim: &Sim) -> Vec<String> {
    sim.log
        .iter()
        .filter(|transition| transition.is_notifiable())
        .map(|transition| {
            let drift = &transition.drift;
            let group = drift.api_version.split('/').next().unwrap_or_default();
            format!(
                "{} {} {group} {}",
                drift.state.as_str(),
                drift.severity.as_str(),
                drift.name
            )
        })
        .collect()
}

const KCERT: &str = "route-6a3f0955-7515-421d-9d01-0a595b510839";

/// Waits until `days` before the derived certificate's `notAfter`.
fn wait_until_days_before(sim: &mut Sim, days: i64) {
    let target = not_after_millis() - days * DAY * 1000;
    let now = T0 + sim.elapsed_seconds() * 1000;
    sim.wait((target - now) / 1000);
}

#[test]
fn a_certificate_warns_then_turns_critical_with_no_event_and_resolves_when_renewed() {
    let mut sim = Sim::new();
    let cert = kcert();
    sim.send("add", &cert);
    // 89 days left: quiet, with the warning's time kept.
    check(sim.lines(), &[]);
    assert_eq!(sim.engine().judge_again_count(), 1);
    let warn_at = not_after_millis() - 14 * DAY * 1000;
    assert_eq!(sim.engine().next_deadline(), Some(warn_at));

    wait_until_days_before(&mut sim, 10);
    check(
        sim.lines(),
        &[
            "pending certificate_expiring Certificate/route-6a3f0955-7515-421d-9d01-0a595b510839",
            "firing certificate_expiring Certificate/route-6a3f0955-7515-421d-9d01-0a595b510839",
        ],
    );
    let fired = sim.last("certificate_expiring");
    assert_eq!(fired.drift.severity, Severity::Warning);
    assert_summary(
        &sim,
        "certificate_expiring",
        "Knative Certificate myapp/route-6a3f0955-7515-421d-9d01-0a595b510839 expires at 2024-01-07T20:36:49.000Z",
        ", within the 14d warning window",
    );
    let facts = &fired.drift.evidence.facts;
    assert_eq!(facts["notAfter"], "2024-01-07T20:36:49.000Z");
    assert_eq!(facts["window"], "warning");
    // Only absolute words: no time left that a reminder days later would repeat untrue.
    assert!(!facts.contains_key("timeLeft"), "{facts:?}");
    assert!(fired
        .drift
        .evidence
        .hint
        .as_deref()
        .unwrap()
        .contains("describe certificates.networking.internal.knative.dev"));

    // Two days left: critical, with no event, and told again.
    wait_until_days_before(&mut sim, 2);
    let escalated = sim.last("certificate_expiring").clone();
    assert_eq!(escalated.drift.severity, Severity::Critical);
    assert!(
        escalated
            .drift
            .evidence
            .summary
            .ends_with("expires at 2024-01-07T20:36:49.000Z, within the 3d critical window"),
        "{}",
        escalated.drift.evidence.summary
    );
    assert_eq!(escalated.drift.evidence.facts["window"], "critical");
    assert_eq!(escalated.from, Some(DriftState::Firing));
    assert!(escalated.is_escalation() && escalated.is_notifiable());
    check(
        sim.notified(),
        &[
            "firing certificate_expiring Certificate/route-6a3f0955-7515-421d-9d01-0a595b510839",
            "firing certificate_expiring Certificate/route-6a3f0955-7515-421d-9d01-0a595b510839",
        ],
    );
    // The store keeps the escalation in the drift's history and its row at the new severity.
    assert_eq!(sim.rows.last().unwrap().severity, Severity::Critical);

    // Renewed: cert-manager issued a new 90-day certificate and Knative copied its notAfter.
    let renewed = changed(&cert, |c| {
        c["status"]["notAfter"] = json!("2024-04-04T20:36:49Z")
    });
    sim.send("update", &renewed);
    let resolved = sim.last("certificate_expiring");
    assert_eq!(resolved.drift.state, DriftState::Resolved);
    assert!(resolved
        .drift
        .resolution
        .as_deref()
        .unwrap()
        .starts_with("expires 2024-04-04T20:36:49.000Z (90d from now)"));
    assert!(sim.open().is_empty());
    // Judged again when the renewed one nears its end.
    assert_eq!(sim.engine().judge_again_count(), 1);
}

#[test]
fn an_expired_certificate_is_critical_and_asks_for_nothing_more() {
    let mut sim = Sim::new();
    sim.send("add", &kcert());
    wait_until_days_before(&mut sim, -1);
    let fired = sim.last("certificate_expiring");
    assert_eq!(fired.drift.severity, Severity::Critical);
    assert!(
        fired
            .drift
            .evidence
            .summary
            .ends_with("expired at 2024-01-07T20:36:49.000Z"),
        "{}",
        fired.drift.evidence.summary
    );
    assert_eq!(fired.drift.evidence.facts["expired"], "true");
    assert_eq!(fired.drift.evidence.facts["window"], "expired");
    // Only the opening move is told: it opened critical (no warning was seen while asleep).
    assert_eq!(sim.notified().len(), 1);
    assert_eq!(sim.engine().judge_again_count(), 0);
}

#[test]
fn a_certificate_with_no_not_after_is_quiet_and_keeps_no_time() {
    let mut sim = Sim::new();
    // Just created: cert-manager has issued nothing yet.
    sim.send("add", &derived("certificate-not-ready.yaml"));
    // The Knative manifest Serving ships (no status at all).
    let mut shipped = fixture_yaml(
        "../certificates/knative-serving__config-core-300-knativecertificate__Certificate-routing-serving-certs.yaml",
    );
    shipped["metadata"]["uid"] = json!("0e5b5c1e-7a43-4a44-b3c5-1d6a8f1e2b3c");
    shipped["metadata"]["generation"] = json!(1);
    shipped["metadata"]["creationTimestamp"] = json!("2024-01-25T00:00:00Z");
    sim.send("add", &changed(&shipped, |_| {}));
    sim.wait(400 * DAY);
    // (The first one is not ready, which is `not_ready`'s business.)
    assert!(
        !sim.lines()
            .iter()
            .any(|line| line.contains("certificate_expiring")),
        "{:?}",
        sim.lines()
    );
    assert_eq!(sim.engine().judge_again_count(), 0);
}

#[test]
fn a_restart_judges_again_and_escalates_what_crossed_a_threshold_while_down() {
    let mut sim = Sim::new();
    sim.send("add", &kcert());
    wait_until_days_before(&mut sim, 10);
    assert_eq!(sim.open().len(), 1);
    sim.restart();
    // The restored engine knows no time until it re-assesses its objects.
    assert_eq!(sim.engine().judge_again_count(), 0);
    // Down for eight days: the first round after the start re-assesses, and the drift that
    // crossed criticalBefore meanwhile is critical now, told again.
    sim.wait(8 * DAY);
    assert_eq!(sim.engine().judge_again_count(), 1);
    let escalated = sim.last("certificate_expiring");
    assert!(escalated.is_escalation(), "{:?}", sim.lines());
    assert_eq!(escalated.drift.severity, Severity::Critical);
    assert_eq!(
        sim.engine().next_deadline(),
        Some(not_after_millis()),
        "the next threshold is the expiry itself"
    );
}

#[test]
fn a_restart_before_any_threshold_registers_the_time_again() {
    let mut sim = Sim::new();
    sim.send("add", &kcert());
    sim.restart();
    sim.wait(0);
    assert_eq!(sim.engine().judge_again_count(), 1);
    wait_until_days_before(&mut sim, 13);
    assert_eq!(sim.open().len(), 1, "{:?}", sim.lines());
}

/// The evidence changes only with the window (or what cert-manager says), not with `now`: an
/// hour on, a resync pass that judges the unchanged certificate again writes no drift row.
#[test]
fn a_resync_pass_judges_an_unchanged_certificate_again_and_rewrites_nothing() {
    let mut sim = Sim::new();
    // 2 days 2 hours 20 minutes left: critical at once.
    let cm = cert_manager("2023-10-12T00:00:00Z");
    sim.send("add", &cm);
    assert_eq!(
        sim.open(),
        vec!["certificate_expiring firing Certificate/example-com"]
    );
    let rows = sim.rows.len();
    let history = sim.history.len();
    sim.wait(3600);
    // The list finds it unchanged (stale by its version), and judges it all the same.
    assert_eq!(sim.list(&cm), drift_core::classify::Outcome::Stale);
    assert_eq!(
        sim.engine().next_deadline(),
        Some(T0 + (2 * DAY + 2 * 3600 + 20 * 60) * 1000)
    );
    // The same verdict, the same evidence: nothing to write.
    assert_eq!(sim.rows.len(), rows, "{:?}", &sim.rows[rows..]);
    assert_eq!(sim.history.len(), history);
    // So does an event that changes nothing the class reads (a new resourceVersion).
    sim.send("update", &changed(&cm, |_| {}));
    assert_eq!(sim.rows.len(), rows, "{:?}", &sim.rows[rows..]);
    assert_eq!(
        sim.engine().open_drifts().next().unwrap().evidence.facts["window"],
        "critical"
    );
}

#[test]
fn a_knative_certificate_and_its_cert_manager_child_are_one_alert() {
    let mut sim = Sim::new();
    let cert = kcert();
    sim.send("add", &cert);
    // cert-manager's view is fresher: renewal failing, 5 days left there.
    let child = child_of(&cert, "2023-10-14T21:40:00Z");
    sim.send("add", &child);
    check(
        sim.lines(),
        &[
            "pending certificate_expiring Certificate/route-6a3f0955-7515-421d-9d01-0a595b510839",
            "firing certificate_expiring Certificate/route-6a3f0955-7515-421d-9d01-0a595b510839",
        ],
    );
    let fired = sim.last("certificate_expiring");
    assert_eq!(fired.drift.kind, "Certificate");
    assert_eq!(
        fired.drift.api_version,
        "networking.internal.knative.dev/v1alpha1"
    );
    assert!(
        fired.drift.evidence.summary.ends_with(
            "as its cert-manager Certificate route-6a3f0955-7515-421d-9d01-0a595b510839 says"
        ),
        "{}",
        fired.drift.evidence.summary
    );
    assert_eq!(fired.drift.evidence.facts["window"], "warning");
    let hint = fired.drift.evidence.hint.as_deref().unwrap();
    assert!(hint.contains("Issuing=True (Renewing)"), "{hint}");
    assert!(hint.contains("cmctl renew -n myapp"), "{hint}");
    assert_eq!(
        fired.drift.evidence.facts["condition.Ready"],
        "Ready=True (Ready): Certificate is up to date and has not expired"
    );
    // The child renews: the owner's drift resolves at the child's event.
    let renewed = changed(&child, |c| {
        c["status"]["notAfter"] = json!("2024-01-12T21:40:00Z");
    });
    sim.send("update", &renewed);
    assert!(sim.open().is_empty(), "{:?}", sim.lines());
    check(
        told(&sim),
        &[
            &format!("firing warning networking.internal.knative.dev {KCERT}"),
            &format!("resolved warning networking.internal.knative.dev {KCERT}"),
        ],
    );
    // A cert-manager Certificate of its own (no Knative owner) is judged on itself.
    sim.send("add", &cert_manager("2023-10-12T21:40:00Z"));
    assert_eq!(
        sim.open(),
        vec!["certificate_expiring firing Certificate/example-com"]
    );
}

/// The initial events of different kinds arrive in any order (first deploy, a lost store): a
/// child seen before its Knative owner is not judged on itself, so users hear of one expiry
/// once, on the owner.
#[test]
fn a_cert_manager_child_seen_before_its_owner_is_one_notification() {
    let mut sim = Sim::new();
    let cert = kcert();
    let child = child_of(&cert, "2023-10-14T21:40:00Z");
    // Its owner not tracked yet: quiet, and no time kept for it.
    sim.send("add", &child);
    assert!(sim.lines().is_empty(), "{:?}", sim.lines());
    assert_eq!(sim.engine().judge_again_count(), 0);
    // The owner arrives: one drift, on the Knative Certificate, from the child's status.
    sim.send("add", &cert);
    check(
        told(&sim),
        &[&format!(
            "firing warning networking.internal.knative.dev {KCERT}"
        )],
    );
    assert_eq!(sim.notified().len(), 1, "{:?}", sim.notified());
    let fired = sim.last("certificate_expiring");
    assert_eq!(
        fired.drift.evidence.facts["notAfter"],
        "2023-10-14T21:40:00.000Z"
    );
    assert_eq!(sim.engine().judge_again_count(), 1, "the owner's time only");
    // The child's next events (its renewal failing again) tell nobody anything new.
    sim.send(
        "update",
        &changed(&child, |c| c["status"]["failedIssuanceAttempts"] = json!(4)),
    );
    assert_eq!(sim.notified().len(), 1, "{:?}", sim.notified());
}

/// An owner being deleted ends its drift; its child's events then open none on the child.
#[test]
fn a_child_of_a_deleted_owner_is_not_judged_on_itself() {
    let mut sim = Sim::new();
    let cert = kcert();
    let child = child_of(&cert, "2023-10-14T21:40:00Z");
    sim.send("add", &cert);
    sim.send("add", &child);
    let deleting = changed(&cert, |c| {
        c["metadata"]["deletionTimestamp"] = json!("2023-10-09T21:40:00Z");
    });
    sim.send("update", &deleting);
    sim.send(
        "update",
        &changed(&child, |c| c["status"]["failedIssuanceAttempts"] = json!(4)),
    );
    check(
        told(&sim),
        &[
            &format!("firing warning networking.internal.knative.dev {KCERT}"),
            &format!("resolved warning networking.internal.knative.dev {KCERT}"),
        ],
    );
    assert!(sim.open().is_empty(), "{:?}", sim.open());
}

/// Knative copies its child's `notAfter`, and a recreated child has none for a while: an open
/// drift is kept (no verdict), not resolved; it resolves when `notAfter` moves out (renewal).
#[test]
fn a_missing_or_unreadable_not_after_keeps_an_open_drift() {
    let mut sim = Sim::new();
    // As Knative copies it: the owner's notAfter is the child's.
    let cert = changed(&kcert(), |c| {
        c["status"]["notAfter"] = json!("2023-10-14T21:40:00Z")
    });
    sim.send("add", &cert);
    let child = child_of(&cert, "2023-10-14T21:40:00Z");
    sim.send("add", &child);
    assert_eq!(sim.open().len(), 1);
    // The child is recreated: a new uid, and no notAfter yet.
    let recreated = changed(&child, |c| {
        c["metadata"]["uid"] = json!("5b0c6a57-0c02-4e8e-9d2a-7c2d3f0e1a03");
        c["status"].as_object_mut().unwrap().remove("notAfter");
    });
    sim.send("delete", &changed(&child, |_| {}));
    sim.send("add", &recreated);
    // The owner, with Knative's copy gone too, and then an unreadable one.
    sim.send(
        "update",
        &changed(&cert, |c| {
            c["status"].as_object_mut().unwrap().remove("notAfter");
        }),
    );
    sim.send(
        "update",
        &changed(&recreated, |c| c["status"]["notAfter"] = json!("soon")),
    );
    sim.wait(3600);
    assert_eq!(sim.open().len(), 1, "{:?}", sim.lines());
    check(
        told(&sim),
        &[&format!(
            "firing warning networking.internal.knative.dev {KCERT}"
        )],
    );
    // The new child is issued: renewed, out of the window, resolved.
    sim.send(
        "update",
        &changed(&recreated, |c| {
            c["status"]["notAfter"] = json!("2024-01-12T21:40:00Z")
        }),
    );
    assert!(sim.open().is_empty(), "{:?}", sim.lines());
    assert_eq!(told(&sim).len(), 2, "{:?}", told(&sim));
}

#[test]
fn deleting_a_certificate_forgets_its_time() {
    let mut sim = Sim::new();
    let cert = kcert();
    sim.send("add", &cert);
    assert_eq!(sim.engine().judge_again_count(), 1);
    sim.send("delete", &changed(&cert, |_| {}));
    assert_eq!(sim.engine().judge_again_count(), 0);
}

#[test]
fn a_rolled_back_round_puts_the_time_back() {
    let mut sim = Sim::new();
    sim.send("add", &kcert());
    let days_to_warning = (not_after_millis() - 14 * DAY * 1000 - T0) / 1000 + 1;
    let changes = sim.wait_and_fail_commit(days_to_warning);
    assert_eq!(
        changes.transitions.len(),
        2,
        "opened and fired, then rolled back"
    );
    assert_eq!(sim.engine().judge_again_count(), 1);
    assert!(sim.open().is_empty());
    // The next round finds it again.
    sim.wait(0);
    assert_eq!(sim.open().len(), 1);
}
