//! Remediation planning on real objects and real findings: the engine fires a drift from
//! fixture-based events (the simulator of `scenario.rs`), the policy compiled from a
//! `remediation:` section decides, and the exact request is checked, and for a revert applied
//! to the object as the API server would apply a merge patch (RFC 7386), so the test shows the
//! patch puts the object back, not only that it has some shape. The config's validation is
//! checked in `remediation_config.rs`.

use drift_core::config::{load_str, RemediationConfig};
use drift_core::remediate::{
    object_name, Action, Approval, Decision, Ledger, Policy, Refusal, Subject,
};
use drift_model::{Drift, DriftState};
use serde_json::{json, Value};

use crate::scenario::*;

/// The policy of a `remediation:` section (YAML), for a config whose `defaultCluster` is the
/// simulator's `prod`: resync on `auto`, so `prod` is the writable cluster.
fn policy(yaml: &str) -> Policy {
    let config = load_str("defaultCluster: prod", &|_| None).unwrap();
    let section: RemediationConfig = serde_saphyr::from_str(yaml).expect("remediation yaml");
    section
        .compile(&config.resync, &config.default_cluster)
        .expect("remediation compiles")
}

const REVERT_EDITS: &str = "mode: apply\nrules:\n- name: revert-hand-edits\n  match: {classes: [manual_edit, config_drift], kinds: [Service.serving.knative.dev, ConfigMap]}\n  action: revert\n  approval: auto\n  cooldown: 10m\n";

/// RFC 7386, as the API server applies `application/merge-patch+json`.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(members) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let map = target.as_object_mut().unwrap();
    for (key, value) in members {
        if value.is_null() {
            map.remove(key);
        } else {
            merge(map.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// The object the drift was judged on, from the engine's graph.
fn state_of(sim: &Sim, drift: &Drift) -> drift_core::classify::ObjectState {
    sim.engine()
        .graph()
        .by_uid(&drift.cluster, &drift.uid)
        .expect("the object is tracked")
        .clone()
}

fn subject(object: &drift_core::classify::ObjectState) -> Subject<'_> {
    Subject {
        object,
        namespace_opted_out: false,
        last_ready_revision: None,
        latest_revision_failed: false,
    }
}

/// The hand edit of `classes.rs`: kubectl-edit splits the traffic 90/10.
fn traffic_edit(original: &Value) -> Value {
    changed(original, |s| {
        s["spec"]["traffic"] = json!([{"latestRevision": true, "percent": 90}, {"revisionName": "knative-webapp-00000", "percent": 10}]);
        s["metadata"]["labels"]["team"] = json!("payments");
        written_by(
            s,
            "kubectl-edit",
            "Update",
            json!({"f:spec": {"f:traffic": {}}, "f:metadata": {"f:labels": {"f:team": {}}}}),
            "2023-10-09T21:45:00Z",
        );
    })
}

#[test]
fn a_hand_edit_of_traffic_is_reverted_by_one_merge_patch_that_puts_the_object_back() {
    let mut sim = Sim::new();
    let original = service();
    sim.send("add", &original);
    let edited = traffic_edit(&original);
    sim.send("update", &edited);
    let drift = sim.last("manual_edit").drift.clone();
    assert_eq!(drift.state, DriftState::Firing);
    let object = state_of(&sim, &drift);
    let policy = policy(REVERT_EDITS);
    let mut ledger = Ledger::default();
    let decision = policy.decide(&drift, subject(&object), &mut ledger, T0 + 60_000);
    let Decision::Planned {
        rule,
        action,
        approval,
        request,
    } = decision
    else {
        panic!("planned: {decision:?}");
    };
    assert_eq!(
        (rule.as_str(), action, approval),
        ("revert-hand-edits", Action::Revert, Approval::Auto)
    );
    assert_eq!(request.method, "PATCH");
    assert_eq!(
        request.path,
        "/apis/serving.knative.dev/v1/namespaces/myapp/services/knative-webapp?fieldManager=drift-sentinel"
    );
    assert_eq!(request.content_type, "application/merge-patch+json");
    let version = edited["metadata"]["resourceVersion"].clone();
    assert_eq!(request.resource_version.as_deref(), version.as_str());
    // Exactly the drifted fields: the whole (atomic) traffic list as it was, the label removed,
    // and the version the finding was judged on.
    assert_eq!(
        request.body,
        json!({
            "metadata": {"resourceVersion": version, "labels": {"team": null}},
            "spec": {"traffic": original["spec"]["traffic"]},
        })
    );
    // Applied as the API server would: the spec and labels are the original's again.
    let mut patched = edited.clone();
    merge(&mut patched, &request.body);
    assert_eq!(patched["spec"], original["spec"]);
    // The fixture has no labels: the one the edit added is gone (an empty map is none).
    assert_eq!(original["metadata"].get("labels"), None);
    assert_eq!(patched["metadata"]["labels"], json!({}));
    // Counted: the same object is in its cooldown now.
    let again = policy.decide(&drift, subject(&object), &mut ledger, T0 + 120_000);
    assert!(
        matches!(
            &again,
            Decision::Refused {
                refusal: Refusal::Cooldown(_),
                ..
            }
        ),
        "{again:?}"
    );
}

#[test]
fn a_hand_edit_of_config_autoscaler_is_reverted_key_by_key() {
    let mut sim = Sim::new();
    let original = config_autoscaler();
    sim.send("add", &original);
    let edited = changed(&original, |c| {
        c["data"]["enable-scale-to-zero"] = json!("false");
        c["data"]["max-scale"] = json!("3");
        written_by(
            c,
            "kubectl-edit",
            "Update",
            json!({"f:data": {"f:enable-scale-to-zero": {}, "f:max-scale": {}}}),
            "2023-10-09T21:45:00Z",
        );
    });
    sim.send("update", &edited);
    sim.wait(120);
    let drift = sim.last("config_drift").drift.clone();
    assert_eq!(drift.state, DriftState::Firing, "{:?}", sim.lines());
    let object = state_of(&sim, &drift);
    let decision = policy(REVERT_EDITS).decide(
        &drift,
        subject(&object),
        &mut Ledger::default(),
        T0 + 180_000,
    );
    let Decision::Planned { request, .. } = decision else {
        panic!("planned: {decision:?}");
    };
    assert_eq!(
        request.path,
        "/api/v1/namespaces/knative-serving/configmaps/config-autoscaler?fieldManager=drift-sentinel"
    );
    let mut data = json!({"enable-scale-to-zero": original["data"]["enable-scale-to-zero"]});
    // A key the edit added is removed (`null`); one it changed gets its value back.
    data["max-scale"] = original["data"]
        .get("max-scale")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        request.body,
        json!({"metadata": {"resourceVersion": edited["metadata"]["resourceVersion"]}, "data": data})
    );
    let mut patched = edited.clone();
    merge(&mut patched, &request.body);
    assert_eq!(patched["data"], original["data"]);
}

#[test]
fn a_finding_the_object_has_moved_past_gets_no_request() {
    let mut sim = Sim::new();
    let original = service();
    sim.send("add", &original);
    let edited = traffic_edit(&original);
    sim.send("update", &edited);
    let drift = sim.last("manual_edit").drift.clone();
    // A second edit of the same list by someone else, before the plan is made.
    let moved = changed(&edited, |s| {
        s["spec"]["traffic"] = json!([{"latestRevision": true, "percent": 100}]);
    });
    sim.send("update", &moved);
    let object = state_of(&sim, &drift);
    let decision =
        policy(REVERT_EDITS).decide(&drift, subject(&object), &mut Ledger::default(), T0);
    match decision {
        Decision::Refused { refusal, .. } => {
            assert_eq!(refusal.kind(), "stale", "{refusal}");
            assert!(
                refusal.to_string().starts_with("/spec/traffic/"),
                "{refusal}"
            );
        }
        other => panic!("refused: {other:?}"),
    }
}

#[test]
fn every_rail_stops_a_matched_drift_and_says_which() {
    let mut sim = Sim::new();
    let original = service();
    sim.send("add", &original);
    sim.send("update", &traffic_edit(&original));
    let drift = sim.last("manual_edit").drift.clone();
    let object = state_of(&sim, &drift);
    let refusal =
        |policy: &Policy, drift: &Drift, subject: Subject<'_>, ledger: &mut Ledger| match policy
            .decide(drift, subject, ledger, T0 + 60_000)
        {
            Decision::Refused { refusal, .. } => refusal.kind(),
            other => panic!("refused: {other:?}"),
        };
    let apply = policy(REVERT_EDITS);
    // Opted out: the object, or its namespace.
    let mut opted = object.clone();
    opted.annotations = [("drift-sentinel.dev/remediation", "off")]
        .into_iter()
        .collect();
    assert_eq!(
        refusal(&apply, &drift, subject(&opted), &mut Ledger::default()),
        "opted_out"
    );
    let namespace_off = Subject {
        namespace_opted_out: true,
        ..subject(&object)
    };
    assert_eq!(
        refusal(&apply, &drift, namespace_off, &mut Ledger::default()),
        "opted_out"
    );
    // Pending: not yet.
    let pending = Drift {
        state: DriftState::Pending,
        ..drift.clone()
    };
    assert_eq!(
        refusal(&apply, &pending, subject(&object), &mut Ledger::default()),
        "not_firing"
    );
    // Another cluster than the one the client reaches.
    let elsewhere = Drift {
        cluster: "staging".to_string(),
        ..drift.clone()
    };
    assert_eq!(
        refusal(&apply, &elsewhere, subject(&object), &mut Ledger::default()),
        "unreachable"
    );
    // The budget: one action per hour, spent on another object.
    let tight = policy(&format!("{REVERT_EDITS}budget: {{actions: 1, per: 1h}}\n"));
    let mut ledger = Ledger::default();
    ledger.record(
        "prod",
        "serving.knative.dev/v1/Service/myapp/other",
        &[],
        T0,
    );
    assert_eq!(
        refusal(&tight, &drift, subject(&object), &mut ledger),
        "budget"
    );
    // A fight: three times kubectl-edit sets the traffic back after a revert; the fourth
    // decision is refused and names it.
    let mut ledger = Ledger::default();
    let mut eager = apply.clone();
    eager.rules[0].cooldown = std::time::Duration::ZERO;
    let name = object_name(&drift);
    let fields: Vec<String> = drift
        .evidence
        .changes
        .iter()
        .map(|change| change.path.clone())
        .collect();
    for round in 1..=3 {
        let at = T0 + round * 60_000;
        assert!(matches!(
            eager.decide(&drift, subject(&object), &mut ledger, at),
            Decision::Planned { .. }
        ));
        // Planned is not applied: only an applied revert's fields count for a fight.
        assert_eq!(
            ledger.set_back(
                "prod",
                &name,
                "kubectl-edit",
                &fields,
                eager.fight,
                at + 500
            ),
            None
        );
        ledger.reverted("prod", &name, &fields, at + 600);
        let started = ledger.set_back(
            "prod",
            &name,
            "kubectl-edit",
            &fields,
            eager.fight,
            at + 1_000,
        );
        assert_eq!(started.is_some(), round == 3, "round {round}");
    }
    match eager.decide(&drift, subject(&object), &mut ledger, T0 + 300_000) {
        Decision::Refused { refusal, .. } => assert_eq!(
            refusal,
            Refusal::Fight {
                manager: "kubectl-edit".to_string(),
                times: 3
            }
        ),
        other => panic!("refused: {other:?}"),
    }
    // mode: off plans nothing at all, for every class.
    let off = policy(&REVERT_EDITS.replace("mode: apply", "mode: off"));
    assert_eq!(
        off.decide(&drift, subject(&object), &mut Ledger::default(), T0),
        Decision::NoRule
    );
}

#[test]
fn a_secret_is_never_planned_even_when_a_rule_names_its_class() {
    let mut sim = Sim::new();
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "creds", "namespace": "myapp", "uid": "secret-uid-1", "resourceVersion": "100",
                     "managedFields": [{"manager": "helm", "operation": "Update", "apiVersion": "v1",
                                        "time": "2023-10-09T21:00:00Z", "fieldsType": "FieldsV1",
                                        "fieldsV1": {"f:data": {"f:password": {}}}}]},
        "type": "Opaque", "data": {"password": "c2VjcmV0"},
    });
    sim.send("add", &secret);
    let edited = changed(&secret, |s| {
        s["data"]["password"] = json!("b3RoZXI=");
        written_by(
            s,
            "kubectl-edit",
            "Update",
            json!({"f:data": {"f:password": {}}}),
            "2023-10-09T21:45:00Z",
        );
    });
    sim.send("update", &edited);
    let drift = sim.last("manual_edit").drift.clone();
    let object = state_of(&sim, &drift);
    let any_kind = policy(
        "mode: apply\nrules:\n- name: all\n  match: {classes: [manual_edit]}\n  action: revert\n  approval: auto\n",
    );
    match any_kind.decide(
        &drift,
        subject(&object),
        &mut Ledger::default(),
        T0 + 60_000,
    ) {
        Decision::Refused { refusal, .. } => assert_eq!(refusal, Refusal::Secret),
        other => panic!("refused: {other:?}"),
    }
}

#[test]
fn a_deleted_service_is_restored_by_a_create_without_server_fields() {
    let mut sim = Sim::new();
    let service = service();
    sim.send("add", &service);
    sim.send("delete", &changed(&service, |_| {}));
    sim.wait(61);
    let drift = sim.last("unexpected_delete").drift.clone();
    assert_eq!(drift.state, DriftState::Firing);
    let object = state_of(&sim, &drift);
    let policy = policy(
        "mode: apply\nrules:\n- name: bring-back\n  match: {classes: [unexpected_delete]}\n  action: restore\n",
    );
    let Decision::Planned {
        approval, request, ..
    } = policy.decide(
        &drift,
        subject(&object),
        &mut Ledger::default(),
        T0 + 120_000,
    )
    else {
        panic!("planned");
    };
    // Unset approval is manual: a person lets a re-create go.
    assert_eq!(approval, Approval::Manual);
    assert_eq!(request.method, "POST");
    assert_eq!(
        request.path,
        "/apis/serving.knative.dev/v1/namespaces/myapp/services?fieldManager=drift-sentinel"
    );
    assert_eq!(request.resource_version, None);
    let metadata = request.body["metadata"].as_object().unwrap();
    for server_field in [
        "uid",
        "resourceVersion",
        "managedFields",
        "creationTimestamp",
        "generation",
    ] {
        assert!(!metadata.contains_key(server_field), "{server_field}");
    }
    assert!(request.body.get("status").is_none());
    // The spec as it was, less the template's `creationTimestamp: null` (Go's zero time, which
    // the Knative schemas do not list: `restorable`'s docs).
    let mut spec = service["spec"].clone();
    spec["template"]["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("creationTimestamp");
    assert_eq!(request.body["spec"], spec);
    assert_eq!(request.body["metadata"]["name"], json!("knative-webapp"));
}

#[test]
fn an_orphan_is_deleted_on_its_uid_only() {
    let mut sim = Sim::new();
    let revision = changed(&revision(), |r| {
        r["metadata"]["labels"]["serving.knative.dev/routingState"] = json!("reserve")
    });
    sim.send("add", &revision);
    let deployment = deployment();
    sim.send("add", &deployment);
    sim.send("delete", &changed(&revision, |_| {}));
    sim.wait(601);
    let drift = sim.last("orphan").drift.clone();
    assert_eq!(drift.state, DriftState::Firing);
    let object = state_of(&sim, &drift);
    let policy = policy(
        "mode: apply\nrules:\n- name: clean-up\n  match: {classes: [orphan], kinds: [Deployment]}\n  action: deleteOrphan\n  approval: manual\n",
    );
    let Decision::Planned { request, .. } = policy.decide(
        &drift,
        subject(&object),
        &mut Ledger::default(),
        T0 + 700_000,
    ) else {
        panic!("planned");
    };
    assert_eq!(request.method, "DELETE");
    assert_eq!(
        request.path,
        "/apis/apps/v1/namespaces/myapp/deployments/knative-webapp-00001-deployment"
    );
    assert_eq!(
        request.body["preconditions"],
        json!({"uid": deployment["metadata"]["uid"]})
    );
}

#[test]
fn rollback_pins_the_last_ready_revision_and_keeps_tagged_targets_at_zero() {
    let mut sim = Sim::new();
    let tagged = changed(&service(), |s| {
        s["spec"]["traffic"] = json!([
            {"latestRevision": true, "percent": 100},
            {"revisionName": "knative-webapp-00001", "percent": 0, "tag": "previous"},
        ]);
    });
    sim.send("add", &tagged);
    let uid = tagged["metadata"]["uid"].as_str().unwrap();
    let object = sim.engine().graph().by_uid("prod", uid).unwrap().clone();
    let request = drift_core::remediate::plan::rollback(&object, Some("knative-webapp-00001"))
        .expect("a Service with a Ready Revision rolls back");
    assert_eq!(
        request.body,
        json!({
            "metadata": {"resourceVersion": tagged["metadata"]["resourceVersion"]},
            "spec": {"traffic": [
                {"revisionName": "knative-webapp-00001", "percent": 100},
                {"revisionName": "knative-webapp-00001", "percent": 0, "tag": "previous"},
            ]},
        })
    );
    assert_eq!(
        drift_core::remediate::plan::rollback(&object, None)
            .unwrap_err()
            .kind(),
        "no_ready_revision"
    );
}

#[test]
fn a_revert_rebuilds_lists_that_shrank_grew_or_changed_inside() {
    let mut sim = Sim::new();
    // Three targets and one env variable, as first seen (not an edit).
    let original = changed(&service(), |s| {
        s["spec"]["traffic"] = json!([
            {"revisionName": "knative-webapp-00001", "percent": 50},
            {"revisionName": "knative-webapp-00002", "percent": 30},
            {"latestRevision": true, "percent": 20},
        ]);
        s["spec"]["template"]["spec"]["containers"][0]["env"] =
            json!([{"name": "A", "value": "1"}]);
    });
    sim.send("add", &original);
    // A hand edit: the list shrinks by two, a nested list grows by two.
    let edited = changed(&original, |s| {
        s["spec"]["traffic"] = json!([{"revisionName": "knative-webapp-00001", "percent": 100}]);
        s["spec"]["template"]["spec"]["containers"][0]["env"] = json!([
            {"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "C", "value": "3"},
        ]);
        written_by(
            s,
            "kubectl-edit",
            "Update",
            json!({"f:spec": {"f:traffic": {}, "f:template": {"f:spec": {"f:containers": {}}}}}),
            "2023-10-09T21:45:00Z",
        );
    });
    sim.send("update", &edited);
    let drift = sim.last("manual_edit").drift.clone();
    let object = state_of(&sim, &drift);
    let decision = policy(REVERT_EDITS).decide(
        &drift,
        subject(&object),
        &mut Ledger::default(),
        T0 + 60_000,
    );
    let Decision::Planned { request, .. } = decision else {
        panic!("planned: {decision:?}");
    };
    let mut patched = edited.clone();
    merge(&mut patched, &request.body);
    assert_eq!(patched["spec"], original["spec"], "{}", request.body);
}

#[test]
fn binary_data_hashes_are_never_written_back() {
    let mut sim = Sim::new();
    let original = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "certs", "namespace": "myapp", "uid": "cm-binary-uid", "resourceVersion": "500",
                     "managedFields": [{"manager": "helm", "operation": "Update", "apiVersion": "v1",
                                        "time": "2023-10-09T21:00:00Z", "fieldsType": "FieldsV1",
                                        "fieldsV1": {"f:data": {"f:mode": {}}, "f:binaryData": {"f:bundle": {}}}}]},
        "data": {"mode": "strict"},
        "binaryData": {"bundle": "AAEC"},
    });
    sim.send("add", &original);
    let edited = changed(&original, |c| {
        c["binaryData"]["bundle"] = json!("AwQF");
        c["data"]["mode"] = json!("lax");
        written_by(
            c,
            "kubectl-edit",
            "Update",
            json!({"f:data": {"f:mode": {}}, "f:binaryData": {"f:bundle": {}}}),
            "2023-10-09T21:45:00Z",
        );
    });
    sim.send("update", &edited);
    let drift = sim.last("manual_edit").drift.clone();
    assert!(!drift.evidence.changes.is_empty());
    let object = state_of(&sim, &drift);
    let any = policy(
        "mode: apply\nrules:\n- name: all\n  match: {classes: [manual_edit]}\n  action: revert\n  approval: auto\n",
    );
    match any.decide(
        &drift,
        subject(&object),
        &mut Ledger::default(),
        T0 + 60_000,
    ) {
        Decision::Refused { refusal, .. } => {
            assert_eq!(refusal.kind(), "not_kept", "{refusal}")
        }
        other => panic!("refused: {other:?}"),
    }
}

#[test]
fn a_not_ready_service_is_rolled_back_only_when_its_latest_revision_failed() {
    let mut sim = Sim::new();
    sim.send("add", &service());
    let object = sim
        .engine()
        .graph()
        .by_uid("prod", service()["metadata"]["uid"].as_str().unwrap())
        .unwrap()
        .clone();
    let mut drift = sim_drift(&object, "not_ready");
    drift.state = DriftState::Firing;
    let policy = policy(
        "mode: apply\nrules:\n- name: pin\n  match: {classes: [not_ready]}\n  action: rollback\n  approval: auto\n",
    );
    let ready = Subject {
        last_ready_revision: Some("knative-webapp-00001"),
        ..subject(&object)
    };
    match policy.decide(&drift, ready, &mut Ledger::default(), T0) {
        Decision::Refused { refusal, .. } => assert_eq!(refusal.kind(), "latest_not_failed"),
        other => panic!("refused: {other:?}"),
    }
    let failed = Subject {
        latest_revision_failed: true,
        ..ready
    };
    assert!(matches!(
        policy.decide(&drift, failed, &mut Ledger::default(), T0),
        Decision::Planned {
            action: Action::Rollback,
            ..
        }
    ));
}

/// A drift of `class` about `object`, shaped as the engine makes them (from a real finding of the
/// simulator, re-aimed).
fn sim_drift(object: &drift_core::classify::ObjectState, class: &str) -> Drift {
    let mut sim = Sim::new();
    let original = service();
    sim.send("add", &original);
    sim.send("update", &traffic_edit(&original));
    let mut drift = sim.last("manual_edit").drift.clone();
    drift.class = class.to_string();
    drift.cluster = object.cluster.clone();
    drift.uid = object.uid.clone();
    drift.evidence.changes.clear();
    drift
}

#[test]
fn mode_off_decides_nothing_for_any_class_even_with_a_rule_for_each() {
    let mut sim = Sim::new();
    sim.send("add", &service());
    let object = sim
        .engine()
        .graph()
        .by_uid("prod", service()["metadata"]["uid"].as_str().unwrap())
        .unwrap()
        .clone();
    // A rule per action, each over every class it can repair; then the same section off.
    let rules: String = Action::ALL
        .iter()
        .map(|action| {
            format!(
                "- name: {name}\n  match: {{classes: [{classes}]}}\n  action: {name}\n  approval: manual\n",
                name = action.as_str(),
                classes = action.classes().join(", "),
            )
        })
        .collect();
    let on = policy(&format!("mode: dryRun\nrules:\n{rules}"));
    let off = policy(&format!("mode: off\nrules:\n{rules}"));
    let mut covered = 0;
    for class in drift_core::classify::classes::catalog().iter() {
        let mut drift = sim_drift(&object, class.id);
        drift.state = DriftState::Firing;
        let mut ledger = Ledger::default();
        assert_eq!(
            off.decide(&drift, subject(&object), &mut ledger, T0),
            Decision::NoRule,
            "{}",
            class.id
        );
        assert!(ledger.is_empty(), "{}", class.id);
        if on.rule_for(&drift).is_some() {
            covered += 1;
        }
    }
    // The rules did take the repairable classes when on: off is what stopped them.
    let repairable: usize = Action::ALL
        .iter()
        .map(|action| action.classes().len())
        .sum();
    assert_eq!(covered, repairable);
}
