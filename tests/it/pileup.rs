//! What `revision_pileup`'s verdict follows (helper-110's review of a change that passed over
//! status churn, `63d289e`, taken out again): a rules reload and a restart, the Configuration's
//! labels (scope, the drift's labels), a Revision moving to another Configuration, its
//! `no-gc` annotation and deletion: each moves the verdict at the next event, as it does now.

use serde_json::{json, Value};

use crate::scenario::*;

const RULES: &str = "classes:\n  revision_pileup:\n    threshold: 4\n";
const FIRING: &str = "firing revision_pileup Configuration/knative-webapp";
const RESOLVED: &str = "resolved revision_pileup Configuration/knative-webapp";

fn notified(sim: &Sim) -> Vec<String> {
    sim.notified()
        .into_iter()
        .filter(|line| line.contains("revision_pileup"))
        .collect()
}

fn pileup_open(sim: &Sim) -> Vec<drift_model::Drift> {
    sim.engine()
        .open_drifts()
        .filter(|drift| drift.class == "revision_pileup")
        .cloned()
        .collect()
}

/// The Configuration, its active Revision and five reserve ones.
fn pile(sim: &mut Sim) -> (Value, Value, Vec<Value>) {
    let configuration = configuration();
    let active = revision();
    sim.send("add", &configuration);
    sim.send("add", &active);
    let mut reserves = Vec::new();
    for number in 2..=6 {
        let mut old = revision();
        old["metadata"]["name"] = json!(format!("knative-webapp-{number:05}"));
        old["metadata"]["uid"] = json!(format!("reserve-{number}"));
        old["metadata"]["labels"]["serving.knative.dev/routingState"] = json!("reserve");
        bump(&mut old);
        sim.send("add", &old);
        reserves.push(old);
    }
    (configuration, active, reserves)
}

fn churn(configuration: &Value, second: u32) -> Value {
    changed(configuration, |c| {
        c["status"]["conditions"][0]["lastTransitionTime"] =
            json!(format!("2023-10-10T08:00:{second:02}Z"));
    })
}

/// A reload that raises the threshold above the count: the drift resolves at the
/// Configuration's next status churn (`reassess`, with no `before`, clears nothing for a class
/// that is not `rejudged_both_ways`: the event's re-count does).
#[test]
fn raised_threshold_resolves_at_next_churn() {
    let mut sim = Sim::with_rules(RULES);
    let (configuration, _, _) = pile(&mut sim);
    sim.wait(601);
    check(notified(&sim), &[FIRING]);
    sim.reload("classes:\n  revision_pileup:\n    threshold: 10\n");
    sim.wait(1);
    sim.wait(1);
    let churned = churn(&configuration, 1);
    sim.send("update", &churned);
    sim.wait(1);
    check(notified(&sim), &[FIRING, RESOLVED]);
}

/// A reload that lowers the threshold: the drift's evidence (facts.threshold) followed at the
/// next churn before; now it keeps the old threshold.
#[test]
fn lowered_threshold_evidence_follows_at_next_churn() {
    let mut sim = Sim::with_rules(RULES);
    let (configuration, _, _) = pile(&mut sim);
    sim.wait(601);
    sim.reload("classes:\n  revision_pileup:\n    threshold: 3\n");
    sim.wait(1);
    sim.send("update", &churn(&configuration, 2));
    sim.wait(1);
    let open = pileup_open(&sim);
    assert_eq!(open.len(), 1);
    assert_eq!(
        open[0].evidence.facts["threshold"], "3",
        "{:?}",
        open[0].evidence
    );
}

/// Scope by label: the Configuration comes into scope by a label edit (status unchanged).
#[test]
fn configuration_labelled_into_scope_opens() {
    let mut sim = Sim::with_rules(
        "scope:\n  matchLabels:\n    team: a\nclasses:\n  revision_pileup:\n    threshold: 4\n",
    );
    let (configuration, _, _) = pile(&mut sim);
    sim.wait(601);
    check(notified(&sim), &[]);
    let labelled = changed(&configuration, |c| {
        c["metadata"]["labels"]["team"] = json!("a");
    });
    sim.send("update", &labelled);
    sim.wait(601);
    check(notified(&sim), &[FIRING]);
}

/// The drift's labels (silences' `label:` matchers, routes) follow the Configuration's.
#[test]
fn drift_labels_follow_configuration_labels() {
    let mut sim = Sim::with_rules(RULES);
    let (configuration, _, _) = pile(&mut sim);
    sim.wait(601);
    let labelled = changed(&configuration, |c| {
        c["metadata"]["labels"]["team"] = json!("b");
    });
    sim.send("update", &labelled);
    sim.wait(1);
    let open = pileup_open(&sim);
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].labels.get("team").map(String::as_str), Some("b"));
}

/// A reserve Revision moved to another Configuration (labels and owner): the event assesses
/// the new one; the old one's count dropped, and its next churn re-counts it.
#[test]
fn revision_moved_away_resolves_at_old_configurations_churn() {
    let mut sim = Sim::with_rules(RULES);
    let (configuration, _, reserves) = pile(&mut sim);
    sim.wait(601);
    let other = changed(&configuration, |c| {
        c["metadata"]["name"] = json!("other");
        c["metadata"]["uid"] = json!("other-config");
    });
    sim.send("add", &other);
    let moved = changed(&reserves[0], |r| {
        r["metadata"]["labels"]["serving.knative.dev/configurationUID"] = json!("other-config");
        r["metadata"]["labels"]["serving.knative.dev/configuration"] = json!("other");
        r["metadata"]["ownerReferences"][0]["uid"] = json!("other-config");
        r["metadata"]["ownerReferences"][0]["name"] = json!("other");
    });
    sim.send("update", &moved);
    sim.wait(1);
    sim.send("update", &churn(&configuration, 3));
    sim.wait(1);
    check(notified(&sim), &[FIRING, RESOLVED]);
}

/// Gaps in the commit's own test: a Revision's no-gc annotation and its deletionTimestamp
/// (labels unchanged) move the count.
#[test]
fn no_gc_annotation_and_deletion_timestamp_move_the_count() {
    let mut sim = Sim::with_rules(RULES);
    let (_, _, reserves) = pile(&mut sim);
    sim.wait(601);
    check(notified(&sim), &[FIRING]);
    let kept = changed(&reserves[0], |r| {
        r["metadata"]["annotations"]["serving.knative.dev/no-gc"] = json!("true");
    });
    sim.send("update", &kept);
    sim.wait(1);
    check(notified(&sim), &[FIRING, RESOLVED]);
    let mut sim = Sim::with_rules(RULES);
    let (_, _, reserves) = pile(&mut sim);
    sim.wait(601);
    let going = changed(&reserves[0], |r| {
        r["metadata"]["deletionTimestamp"] = json!("2023-10-10T08:00:00Z");
    });
    sim.send("update", &going);
    sim.wait(1);
    check(notified(&sim), &[FIRING, RESOLVED]);
}

/// A pending drift (within grace) whose threshold a reload raised resolves unnotified at the
/// next churn: it never fires.
#[test]
fn raised_threshold_while_pending_never_fires() {
    let mut sim = Sim::with_rules(RULES);
    let (configuration, _, _) = pile(&mut sim);
    sim.wait(300);
    sim.reload("classes:\n  revision_pileup:\n    threshold: 10\n");
    sim.wait(1);
    sim.send("update", &churn(&configuration, 4));
    sim.wait(400);
    check(notified(&sim), &[]);
}

/// A reload, then a restart: the restored drift is re-judged with `before: None`.
#[test]
fn raised_threshold_across_restart() {
    let mut sim = Sim::with_rules(RULES);
    let (configuration, _, _) = pile(&mut sim);
    sim.wait(601);
    sim.reload("classes:\n  revision_pileup:\n    threshold: 10\n");
    sim.restart();
    sim.wait(1);
    sim.wait(1);
    sim.send("update", &churn(&configuration, 5));
    sim.wait(1);
    check(notified(&sim), &[FIRING, RESOLVED]);
}

/// Status churn of a pile-up's Configuration and Revisions leaves it as it is; what the count
/// reads moves it, through either object's events: the Configuration's
/// `latestReadyRevisionName`, a Revision's `routingState` label.
#[test]
fn status_churn_leaves_it_and_its_inputs_move_it() {
    let mut sim = Sim::with_rules(RULES);
    let (configuration, active, reserves) = pile(&mut sim);
    sim.wait(601);
    check(notified(&sim), &[FIRING]);
    let transitions = sim.lines().len();
    let churned = churn(&configuration, 1);
    sim.send("update", &churned);
    for old in &reserves {
        sim.send(
            "update",
            &changed(old, |r| {
                r["status"]["conditions"][0]["lastTransitionTime"] = json!("2023-10-10T08:00:02Z");
            }),
        );
    }
    sim.wait(700);
    assert_eq!(sim.lines().len(), transitions, "{:?}", sim.lines());
    // The Configuration's latest ready Revision is a reserve one: 4, at the threshold.
    let moved = changed(&churned, |c| {
        c["status"]["latestReadyRevisionName"] = json!("knative-webapp-00003");
    });
    sim.send("update", &moved);
    sim.wait(120);
    check(notified(&sim), &[FIRING, RESOLVED]);
    // The Revision it was is held in reserve now (a label): 5 again.
    sim.send(
        "update",
        &changed(&active, |r| {
            r["metadata"]["labels"]["serving.knative.dev/routingState"] = json!("reserve");
        }),
    );
    sim.wait(601);
    check(notified(&sim), &[FIRING, RESOLVED, FIRING]);
}

/// Over the threshold it fires on the Configuration; garbage collection deleting reserve
/// Revisions is normal (no delete drift) and clears it.
#[test]
fn over_threshold_and_gc_is_not_a_delete_drift() {
    let mut sim = Sim::with_rules(RULES);
    let (_, _, reserves) = pile(&mut sim);
    sim.wait(601);
    let drift = &sim.last("revision_pileup").drift;
    assert_eq!(drift.evidence.facts["nonActiveRevisions"], "5");
    assert_eq!(drift.kind, "Configuration");
    for old in reserves.iter().take(3) {
        sim.send("delete", &changed(old, |_| {}));
    }
    sim.wait(120);
    check(sim.notified(), &[FIRING, RESOLVED]);
}
