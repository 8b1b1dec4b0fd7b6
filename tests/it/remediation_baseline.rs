//! A revert of a `baseline_drift`: the live object differs from its manifest in Git
//! (`rules.baselineDir`), and the revert puts the baseline's desired values back, exactly on
//! the drifted fields (the simulator of `scenario.rs`, the merge patch applied per RFC 7386).

use drift_core::config::{load_str, RemediationConfig};
use drift_core::remediate::{Decision, Ledger, Subject};
use serde_json::json;

use crate::scenario::*;

const IMAGE: &str = "projects.registry.vmware.com/tanzu_ese_poc/rguske/knative-webapp";

/// The rules with the webapp's manifest in Git at the fixture's own image.
fn git_rules(image: &str) -> drift_core::classify::Rules {
    let mut manifests = drift_core::manifest::Manifests::default();
    manifests
        .add_yaml(
            "git/webapp.yaml",
            &format!(
                "apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata:\n  name: knative-webapp\n  namespace: myapp\nspec:\n  template:\n    spec:\n      containers:\n        - image: {image}\n          ports:\n            - containerPort: 80\n"
            ),
        )
        .unwrap();
    drift_core::classify::Rules::default().with_baseline(
        drift_core::classify::baseline::Baseline::from_manifests(&manifests),
    )
}

#[test]
fn a_baseline_drift_is_reverted_to_what_git_says() {
    let original = service();
    let in_git = original["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
        .to_string();
    let mut sim = Sim::with_compiled(git_rules(&in_git));
    sim.send("add", &original);
    sim.wait(600);
    // A trusted pipeline deploys an image Git does not have.
    let drifted = changed(&original, |s| {
        s["spec"]["template"]["spec"]["containers"][0]["image"] = json!(format!("{IMAGE}:v9"));
        written_by(
            s,
            "helm-controller",
            "Apply",
            json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {}}}}}),
            "2023-10-09T21:50:00Z",
        );
    });
    sim.send("update", &drifted);
    sim.wait(301);
    let drift = sim.last("baseline_drift").drift.clone();
    assert_eq!(drift.state, drift_model::DriftState::Firing);
    let config = load_str("defaultCluster: prod", &|_| None).unwrap();
    let section: RemediationConfig = serde_saphyr::from_str(
        "mode: apply\nrules:\n- name: back-to-git\n  match: {classes: [baseline_drift]}\n  action: revert\n  approval: auto\n",
    )
    .unwrap();
    let policy = section
        .compile(&config.resync, &config.default_cluster)
        .unwrap();
    let object = sim
        .engine()
        .graph()
        .by_uid(&drift.cluster, &drift.uid)
        .unwrap()
        .clone();
    let subject = Subject {
        object: &object,
        namespace_opted_out: false,
        last_ready_revision: None,
        latest_revision_failed: false,
    };
    let Decision::Planned { request, .. } =
        policy.decide(&drift, subject, &mut Ledger::default(), T0 + 1_000_000)
    else {
        panic!("a baseline drift is planned");
    };
    assert_eq!(request.method, "PATCH");
    assert_eq!(
        request.body["metadata"]["resourceVersion"],
        drifted["metadata"]["resourceVersion"]
    );
    let mut patched = drifted.clone();
    crate::support::merge(&mut patched, &request.body);
    assert_eq!(
        patched["spec"]["template"]["spec"]["containers"][0]["image"],
        json!(in_git),
        "{}",
        request.body
    );
    // Nothing but the drifted field changes.
    let mut expected = drifted.clone();
    expected["spec"]["template"]["spec"]["containers"][0]["image"] = json!(in_git);
    assert_eq!(patched["spec"], expected["spec"]);
}
