//! Team invariants in the engine: one drift per (object, rule) with the rule's grace and
//! severity, the change and its writer as evidence, hot reload (a rule added, changed or
//! removed), rules that cannot be evaluated (counted, logged once, never a finding), the budget,
//! `oldObject`, and a restart. The objects are the rguske Knative Service captures.

use serde_json::json;

use crate::scenario::*;

const RULES: &str = r#"
invariants:
  - name: no-latest
    description: Revisions must be reproducible
    match: {apiVersion: "serving.knative.dev/*", kind: Service}
    expression: "object.spec.template.spec.containers.all(c, !c.image.endsWith(':latest'))"
    messageExpression: "'container ' + object.spec.template.spec.containers.filter(c, c.image.endsWith(':latest')).map(c, c.name).join(', ') + ' runs a :latest image'"
    severity: critical
    grace: 1m
  - name: keep-warm
    match: {kind: Service, namespaces: ["my*"]}
    expression: "'autoscaling.knative.dev/min-scale' in object.spec.template.metadata.annotations"
    message: the Service may scale to zero
    grace: 5m
"#;

/// Only the invariants' lines (the built-in classes see the same edits too).
fn rules_only(lines: Vec<String>) -> Vec<String> {
    lines
        .into_iter()
        .filter(|line| line.contains("invariant"))
        .collect()
}

fn latest(service: &serde_json::Value) -> serde_json::Value {
    changed(service, |s| {
        s["spec"]["template"]["spec"]["containers"][0]["image"] =
            json!("projects.registry.vmware.com/tanzu_ese_poc/rguske/knative-webapp:latest");
        s["metadata"]["generation"] = json!(2);
        written_by(
            s,
            "kubectl-edit",
            "Update",
            json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {}}}}}),
            "2023-10-09T22:00:00Z",
        );
    })
}

#[test]
fn two_rules_broken_on_one_object_are_two_drifts_each_with_its_grace_and_severity() {
    let mut sim = Sim::with_rules(RULES);
    let service = service();
    sim.send("add", &service);
    // keep-warm is broken from the start (no min-scale); no-latest holds.
    check(
        rules_only(sim.lines()),
        &["pending invariant/keep-warm Service/knative-webapp"],
    );
    let edited = latest(&service);
    sim.send("update", &edited);
    sim.wait(61);
    check(
        rules_only(sim.notified()),
        &["firing invariant/no-latest Service/knative-webapp"],
    );
    let fired = sim.last("invariant").drift.clone();
    assert_eq!(fired.rule.as_deref(), Some("no-latest"));
    assert_eq!(fired.severity.as_str(), "critical");
    assert_eq!(
        fired.evidence.summary,
        "no-latest: container user-container runs a :latest image"
    );
    assert_eq!(fired.evidence.facts["rule"], "no-latest");
    assert_eq!(
        fired.evidence.facts["description"],
        "Revisions must be reproducible"
    );
    // The change that broke the rule and who made it.
    assert_eq!(
        fired.evidence.changes[0].path,
        "/spec/template/spec/containers/0/image"
    );
    assert_eq!(
        fired.evidence.actor.as_ref().unwrap().manager,
        "kubectl-edit"
    );
    // Status churn while it stays broken keeps that evidence.
    sim.send("update", &changed(&edited, |_| {}));
    assert_eq!(
        rules_only(sim.open()),
        [
            "invariant/keep-warm pending Service/knative-webapp",
            "invariant/no-latest firing Service/knative-webapp"
        ]
    );
    sim.wait(240);
    check(
        rules_only(sim.notified()),
        &[
            "firing invariant/no-latest Service/knative-webapp",
            "firing invariant/keep-warm Service/knative-webapp",
        ],
    );
    assert_eq!(sim.last("invariant").drift.severity.as_str(), "warning");
    // Fixed: the image is pinned again; the other rule is still broken.
    sim.send(
        "update",
        &changed(&edited, |s| {
            s["spec"]["template"]["spec"]["containers"][0]["image"] =
                service["spec"]["template"]["spec"]["containers"][0]["image"].clone();
        }),
    );
    assert_eq!(
        rules_only(sim.notified()).last().unwrap(),
        "resolved invariant/no-latest Service/knative-webapp"
    );
    assert_eq!(
        sim.last("invariant").drift.resolution.as_deref(),
        Some("the rule holds")
    );
    assert_eq!(
        rules_only(sim.open()),
        ["invariant/keep-warm firing Service/knative-webapp"]
    );
    // The object is gone: its rules' drifts resolve.
    sim.send("delete", &changed(&edited, |_| {}));
    assert!(
        rules_only(sim.open()).is_empty(),
        "{:?}",
        rules_only(sim.open())
    );
}

#[test]
fn a_rule_added_changed_or_removed_by_hot_reload_reassesses_the_live_objects() {
    let mut sim = Sim::new();
    let service = service();
    sim.send("add", &service);
    assert!(rules_only(sim.open()).is_empty());
    // Added: the live Service is re-assessed on the next ticks, without an event.
    sim.reload(RULES);
    sim.wait(1);
    assert_eq!(
        rules_only(sim.open()),
        ["invariant/keep-warm pending Service/knative-webapp"]
    );
    sim.wait(300);
    assert_eq!(
        rules_only(sim.open()),
        ["invariant/keep-warm firing Service/knative-webapp"]
    );
    // Changed so that it holds: resolved at the re-assessment.
    sim.reload(&RULES.replace(
        "expression: \"'autoscaling.knative.dev/min-scale' in object.spec.template.metadata.annotations\"",
        "expression: \"object.metadata.name != ''\"",
    ));
    sim.wait(1);
    assert!(
        rules_only(sim.open()).is_empty(),
        "{:?}",
        rules_only(sim.open())
    );
    // Broken again, then removed: its drift resolves because the rule is gone.
    sim.reload(RULES);
    sim.wait(1);
    sim.wait(300);
    assert_eq!(
        rules_only(sim.open()),
        ["invariant/keep-warm firing Service/knative-webapp"]
    );
    sim.reload("{}");
    assert!(
        rules_only(sim.open()).is_empty(),
        "{:?}",
        rules_only(sim.open())
    );
    assert_eq!(
        sim.last("invariant").drift.resolution.as_deref(),
        Some("rule removed from the rules")
    );
}

#[test]
fn a_label_that_moves_an_object_out_of_a_rules_selection_resolves_its_drift() {
    let mut sim = Sim::with_rules(
        r#"
invariants:
  - name: critical-min-scale
    match: {kind: Service, matchLabels: {tier: critical}}
    expression: "'autoscaling.knative.dev/min-scale' in object.spec.template.metadata.annotations"
    grace: 0s
"#,
    );
    let critical = changed(&service(), |s| {
        s["metadata"]["labels"] = json!({"tier": "critical"});
    });
    sim.send("add", &critical);
    assert_eq!(
        rules_only(sim.open()),
        ["invariant/critical-min-scale firing Service/knative-webapp"]
    );
    sim.send(
        "update",
        &changed(&critical, |s| {
            s["metadata"]["labels"] = json!({"tier": "batch"});
        }),
    );
    assert!(rules_only(sim.open()).is_empty());
    assert_eq!(
        sim.last("invariant").drift.resolution.as_deref(),
        Some("the rule no longer selects the object")
    );
}

#[test]
fn a_rule_that_cannot_be_evaluated_is_counted_and_logged_once_never_a_finding() {
    let mut sim = Sim::with_rules(
        r#"
invariants:
  - name: needs-delivery
    match: {kind: Service}
    expression: "object.spec.delivery.retry > 0"
    grace: 0s
  - name: named
    match: {kind: Service}
    expression: "object.metadata.name == 'other'"
    grace: 0s
"#,
    );
    let service = service();
    sim.send("add", &service);
    sim.send("update", &changed(&service, |_| {}));
    // The failing rule opens nothing; the other rule on the same object is judged as usual.
    assert_eq!(
        rules_only(sim.open()),
        ["invariant/named firing Service/knative-webapp"]
    );
    let errors = sim.invariant_errors();
    assert_eq!(
        errors.get(&("needs-delivery".to_string(), "evaluation")),
        Some(&2)
    );
    let failures = sim.invariant_failures();
    assert_eq!(
        failures.len(),
        1,
        "logged once per object and rule: {failures:?}"
    );
    let (rule, kind, object, error) = &failures[0];
    assert_eq!((rule.as_str(), *kind), ("needs-delivery", "evaluation"));
    assert_eq!(object, "Service myapp/knative-webapp");
    assert!(error.contains("delivery"), "{error}");
    sim.send("update", &changed(&service, |_| {}));
    assert!(sim.invariant_failures().is_empty());
}

#[test]
fn a_pathological_rule_is_stopped_by_its_budget_and_the_others_still_run() {
    // Three nested macros over the object's own annotations, made large: 300³ iterations.
    let annotations: serde_json::Map<String, serde_json::Value> = (0..300)
        .map(|index| (format!("example.com/key-{index}"), json!("value")))
        .collect();
    let mut sim = Sim::with_rules(
        r#"
invariants:
  - name: pathological
    match: {kind: Service}
    expression: "object.metadata.annotations.all(a, object.metadata.annotations.all(b, object.metadata.annotations.all(c, a + b + c != '')))"
  - name: named
    match: {kind: Service}
    expression: "object.metadata.name == 'other'"
    grace: 0s
"#,
    );
    let service = changed(&service(), |s| {
        s["metadata"]["annotations"] = serde_json::Value::Object(annotations);
    });
    sim.send("add", &service);
    assert_eq!(
        rules_only(sim.open()),
        ["invariant/named firing Service/knative-webapp"]
    );
    let errors = sim.invariant_errors();
    assert_eq!(
        errors.get(&("pathological".to_string(), "budget")),
        Some(&1)
    );
    let failures = sim.invariant_failures();
    assert!(failures[0].3.contains("budget"), "{failures:?}");
}

/// Issue 27: a `matches` whose pattern comes from the object. 800 annotations whose values are
/// a pattern that compiles to far more than a dynamic pattern may take: each call is charged
/// for its compile (cached or not), so the rule is stopped by its budget (counted as `budget`,
/// not as 800 compiles of 40 ms), and the same object's other rule and the next object are
/// judged as usual.
#[test]
fn a_hostile_dynamic_pattern_rule_is_stopped_by_its_budget_and_a_bystander_is_judged() {
    let annotations: serde_json::Map<String, serde_json::Value> = (0..800)
        .map(|index| {
            (
                format!("example.com/key-{index}"),
                json!(r"^(((\w{1,50}){1,50}){1,20})$"),
            )
        })
        .collect();
    let mut sim = Sim::with_rules(
        r#"
invariants:
  - name: keys-match-values
    match: {kind: Service}
    expression: "object.metadata.annotations.all(k, k.matches(object.metadata.annotations[k]))"
  - name: named
    match: {kind: Service}
    expression: "object.metadata.name == 'other'"
    grace: 0s
"#,
    );
    let hostile = changed(&service(), |s| {
        s["metadata"]["annotations"] = serde_json::Value::Object(annotations);
    });
    sim.send("add", &hostile);
    let errors = sim.invariant_errors();
    assert_eq!(
        errors.get(&("keys-match-values".to_string(), "budget")),
        Some(&1),
        "{errors:?}"
    );
    assert_eq!(
        errors.get(&("keys-match-values".to_string(), "evaluation")),
        None
    );
    let bystander = changed(&service(), |s| {
        s["metadata"]["name"] = json!("bystander");
        s["metadata"]["uid"] = json!("0b5e7a6d-1111-4c2e-9d7a-000000000027");
    });
    sim.send("add", &bystander);
    assert_eq!(
        rules_only(sim.open()),
        [
            // The bystander's own annotations are judged too (its keys are not patterns of
            // themselves).
            "invariant/keys-match-values pending Service/bystander",
            "invariant/named firing Service/bystander",
            "invariant/named firing Service/knative-webapp"
        ]
    );
}

#[test]
fn old_object_is_the_object_before_an_update_and_null_otherwise() {
    let mut sim = Sim::with_rules(
        r#"
invariants:
  - name: image-changes-with-generation
    match: {kind: Service}
    expression: "oldObject == null || oldObject.spec.template.spec.containers[0].image == object.spec.template.spec.containers[0].image || object.spec.template.metadata.annotations.exists(k, k == 'client.knative.dev/user-image')"
    grace: 0s
  - name: no-image-swap
    match: {kind: Service}
    expression: "oldObject == null || oldObject.spec.template.spec.containers[0].image == object.spec.template.spec.containers[0].image"
    grace: 0s
"#,
    );
    let service = service();
    sim.send("add", &service);
    assert!(rules_only(sim.open()).is_empty());
    sim.send("update", &latest(&service));
    assert_eq!(
        rules_only(sim.open()),
        ["invariant/no-image-swap firing Service/knative-webapp"]
    );
    assert!(sim.invariant_errors().is_empty());
}

#[test]
fn a_pending_rule_drift_is_found_again_after_a_restart() {
    let mut sim = Sim::with_rules(RULES);
    sim.send("add", &service());
    assert_eq!(
        rules_only(sim.open()),
        ["invariant/keep-warm pending Service/knative-webapp"]
    );
    sim.restart();
    sim.wait(1);
    assert_eq!(
        rules_only(sim.open()),
        ["invariant/keep-warm pending Service/knative-webapp"]
    );
    sim.wait(300);
    check(
        rules_only(sim.notified()),
        &["firing invariant/keep-warm Service/knative-webapp"],
    );
}

#[test]
fn a_reload_that_narrows_a_rules_selection_resolves_its_drifts() {
    let mut sim = Sim::with_rules(RULES);
    sim.send("add", &service());
    sim.wait(301);
    assert_eq!(
        rules_only(sim.open()),
        ["invariant/keep-warm firing Service/knative-webapp"]
    );
    sim.reload(&RULES.replace(r#"namespaces: ["my*"]"#, r#"namespaces: ["other"]"#));
    assert!(rules_only(sim.open()).is_empty(), "{:?}", sim.open());
    assert_eq!(
        sim.last("invariant").drift.resolution.as_deref(),
        Some("the rule no longer selects the object")
    );
}

#[test]
fn a_transition_rule_is_judged_on_updates_only_and_keeps_its_drift_through_reload_and_restart() {
    const SWAP: &str = r#"
invariants:
  - name: no-image-swap
    match: {kind: Service}
    expression: "oldObject.spec.template.spec.containers[0].image == object.spec.template.spec.containers[0].image"
    grace: 0s
"#;
    let mut sim = Sim::with_rules(SWAP);
    let service = service();
    // First sight: nothing to compare with, no verdict (and no error for the missing oldObject).
    sim.send("add", &service);
    assert!(rules_only(sim.open()).is_empty());
    assert!(sim.invariant_errors().is_empty());
    sim.send("update", &latest(&service));
    assert_eq!(
        rules_only(sim.open()),
        ["invariant/no-image-swap firing Service/knative-webapp"]
    );
    // Re-assessments have no update to judge: the drift stays.
    sim.reload(SWAP);
    sim.wait(1);
    sim.restart();
    sim.wait(1);
    assert_eq!(
        rules_only(sim.open()),
        ["invariant/no-image-swap firing Service/knative-webapp"]
    );
    // The next update that keeps the image judges the transition again.
    sim.send("update", &changed(&latest(&service), |_| {}));
    assert!(rules_only(sim.open()).is_empty());
}

#[test]
fn a_rule_matcher_silences_rule_drifts_only() {
    let mut sim = Sim::with_rules(RULES);
    sim.send("add", &service());
    sim.send("update", &latest(&service()));
    sim.wait(301);
    let silence = drift_model::Silence {
        matchers: [("rule".to_string(), "*".to_string())].into(),
        expires_at: None,
        comment: None,
    };
    let mut muted: Vec<String> = sim
        .log
        .iter()
        .map(|transition| &transition.drift)
        .filter(|drift| silence.matches(drift, 0))
        .map(|drift| format!("{} {:?}", drift.class, drift.rule))
        .collect();
    muted.sort();
    muted.dedup();
    assert_eq!(
        muted,
        [
            "invariant Some(\"keep-warm\")",
            "invariant Some(\"no-latest\")"
        ]
    );
    assert!(sim.log.iter().any(|t| t.drift.class == "manual_edit"));
}
