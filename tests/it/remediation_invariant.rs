//! A revert of a team invariant's drift: only a rule that names its `revertFields` is reverted,
//! and only on those fields (the other changes of the edit that broke it stay); a rule without
//! them is refused as `no_revert_fields`; a `revertFields` pointer a revert cannot write is a
//! config error naming its key path.

use drift_core::config::{load_str, RemediationConfig};
use drift_core::remediate::{Decision, Ledger, Subject};
use serde_json::json;

use crate::scenario::*;

const RULES: &str = r#"
invariants:
  - name: no-latest
    match: {apiVersion: "serving.knative.dev/*", kind: Service}
    expression: "object.spec.template.spec.containers.all(c, !c.image.endsWith(':latest'))"
    message: a container runs a :latest image
    grace: 1m
    revertFields: [/spec/template/spec/containers]
  - name: keep-warm
    match: {kind: Service, namespaces: ["my*"]}
    expression: "'autoscaling.knative.dev/min-scale' in object.spec.template.metadata.annotations"
    message: the Service may scale to zero
    grace: 5m
"#;

fn policy() -> drift_core::remediate::Policy {
    let config = load_str("defaultCluster: prod", &|_| None).unwrap();
    let section: RemediationConfig = serde_saphyr::from_str(
        "mode: apply\nrules:\n- name: invariants\n  match: {classes: [invariant]}\n  action: revert\n  approval: auto\n",
    )
    .unwrap();
    section
        .compile(&config.resync, &config.default_cluster)
        .unwrap()
}

fn subject(object: &drift_core::classify::ObjectState) -> Subject<'_> {
    Subject {
        object,
        namespace_opted_out: false,
        last_ready_revision: None,
        latest_revision_failed: false,
    }
}

#[test]
fn only_the_fields_a_rule_names_are_reverted_and_a_rule_without_them_is_refused() {
    let mut sim = Sim::with_rules(RULES);
    let original = service();
    sim.send("add", &original);
    // One edit breaks no-latest and also labels the Service.
    let edited = changed(&original, |s| {
        s["spec"]["template"]["spec"]["containers"][0]["image"] =
            json!("projects.registry.vmware.com/tanzu_ese_poc/rguske/knative-webapp:latest");
        s["metadata"]["labels"] = json!({"team": "payments"});
        written_by(
            s,
            "kubectl-edit",
            "Update",
            json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {}}}}, "f:metadata": {"f:labels": {"f:team": {}}}}),
            "2023-10-09T22:00:00Z",
        );
    });
    sim.send("update", &edited);
    sim.wait(301);
    let drifts: Vec<_> = sim
        .engine()
        .open_drifts()
        .filter(|drift| drift.class == "invariant")
        .cloned()
        .collect();
    let no_latest = drifts
        .iter()
        .find(|drift| drift.rule.as_deref() == Some("no-latest"))
        .expect("no-latest fires");
    assert!(
        no_latest
            .evidence
            .changes
            .iter()
            .any(|change| change.path == "/metadata/labels/team"),
        "the breaking edit's other change is in the evidence: {:?}",
        no_latest.evidence.changes
    );
    let object = sim
        .engine()
        .graph()
        .by_uid(&no_latest.cluster, &no_latest.uid)
        .unwrap()
        .clone();
    let policy = policy();
    let Decision::Planned { request, .. } = policy.decide(
        no_latest,
        subject(&object),
        &mut Ledger::default(),
        T0 + 1_000_000,
    ) else {
        panic!("no-latest's drift is planned");
    };
    let mut patched = edited.clone();
    crate::support::merge(&mut patched, &request.body);
    assert_eq!(
        patched["spec"]["template"]["spec"]["containers"],
        original["spec"]["template"]["spec"]["containers"],
        "{}",
        request.body
    );
    assert_eq!(
        patched["metadata"]["labels"],
        json!({"team": "payments"}),
        "the label is not the rule's business"
    );
    assert!(
        request.body["metadata"].get("labels").is_none(),
        "{}",
        request.body
    );

    let keep_warm = drifts
        .iter()
        .find(|drift| drift.rule.as_deref() == Some("keep-warm"))
        .expect("keep-warm fires");
    match policy.decide(
        keep_warm,
        subject(&object),
        &mut Ledger::default(),
        T0 + 1_000_000,
    ) {
        Decision::Refused { refusal, .. } => {
            assert_eq!(refusal.kind(), "no_revert_fields", "{refusal}")
        }
        other => panic!("refused: {other:?}"),
    }
}

#[test]
fn a_revert_field_a_revert_cannot_write_is_a_config_error() {
    let error = load_str(
        "rules:\n  invariants:\n  - name: ok\n    expression: 'true'\n    revertFields: [/spec/x]\n  - name: bad\n    expression: 'true'\n    revertFields: [/spec/x, /status/observedGeneration]\n",
        &|_| None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("rules.invariants[1].revertFields[1]: \"/status/observedGeneration\" must be a JSON pointer"),
        "{error}"
    );
}

#[test]
fn revert_fields_take_whole_maps_and_refuse_broken_escapes() {
    let load = |fields: &str| {
        load_str(
            &format!("rules:\n  invariants:\n  - name: r\n    expression: 'true'\n    revertFields: {fields}\n"),
            &|_| None,
        )
        .map(|_| ())
        .map_err(|error| error.to_string())
    };
    assert_eq!(load("[/metadata/labels, /data, /spec]"), Ok(()));
    assert_eq!(
        load("[\"/metadata/annotations/autoscaling.knative.dev~1min-scale\"]"),
        Ok(())
    );
    assert!(load("[\"/spec/~2\"]")
        .unwrap_err()
        .starts_with("rules.invariants[0].revertFields[0]: \"/spec/~2\" must be a JSON pointer"));
    assert!(load("[/metadata/labelsx]").is_err());
}
