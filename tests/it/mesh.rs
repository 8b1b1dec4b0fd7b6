//! `mesh_security_drift` through the engine (issue 32): Istio's precedence rules, which decide
//! what a change of one PeerAuthentication means, and the baseline as the reference. The
//! objects are Istio's own test data (`tests/fixtures/istio/`, verbatim) given the metadata an
//! API server adds; the process tests (`tests/python/test_mesh.py`) cover the simple cases end to
//! end.

use serde_json::{json, Value};

use crate::scenario::*;

fn istio(name: &str, index: usize) -> Value {
    let text = std::fs::read_to_string(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/istio")
            .join(name),
    )
    .expect("fixture exists");
    let documents: Vec<&str> = text.split("\n---\n").collect();
    let mut object: Value = serde_saphyr::from_str(documents[index]).expect("yaml");
    // Istio's test data writes ports as YAML integers; the API server's JSON has strings.
    if let Some(ports) = object["spec"]["portLevelMtls"].as_object().cloned() {
        object["spec"]["portLevelMtls"] =
            Value::Object(ports.into_iter().map(|(k, v)| (k.to_string(), v)).collect());
    }
    object
}

const LEVELS: &str = "istio-istio__pilot-serviceregistry-ambient-testdata__peer-authn-permissive-root-strict-namespace-permissive-workload-in.yaml";
const STRICT: &str =
    "istio-istio__pilot-serviceregistry-ambient-testdata__peer-authn-strict-in.yaml";

/// `object` as the API server returns it, made by a GitOps tool at `created`.
fn live(mut object: Value, uid: &str, namespace: &str, created: &str) -> Value {
    let api_version = object["apiVersion"].clone();
    let metadata = object["metadata"].as_object_mut().expect("metadata");
    metadata.insert("uid".into(), json!(uid));
    metadata.insert("namespace".into(), json!(namespace));
    metadata.insert("creationTimestamp".into(), json!(created));
    metadata.insert("resourceVersion".into(), json!("1"));
    metadata.insert(
        "managedFields".into(),
        json!([{"manager": "argocd-controller", "operation": "Apply",
                "apiVersion": api_version, "time": created,
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]),
    );
    object
}

/// `object` with its mode set to `mode` by `kubectl edit`.
fn mode_set(object: &Value, mode: &str) -> Value {
    let mut edited = changed(object, |o| o["spec"]["mtls"] = json!({"mode": mode}));
    written_by(
        &mut edited,
        "kubectl-edit",
        "Update",
        json!({"f:spec": {"f:mtls": {"f:mode": {}}}}),
        "2026-06-01T00:00:00Z",
    );
    edited
}

#[test]
fn a_namespace_policy_overruled_by_an_older_one_changes_nothing() {
    let mut sim = Sim::new();
    let older = live(istio(STRICT, 0), "pa-old", "team", "2026-01-01T00:00:00Z");
    let mut newer = live(istio(STRICT, 0), "pa-new", "team", "2026-02-01T00:00:00Z");
    newer["metadata"]["name"] = json!("strict-mtls-2");
    sim.send("add", &older);
    sim.send("add", &newer);
    sim.send("update", &mode_set(&newer, "DISABLE"));
    check(sim.lines(), &[]);
    // The older one is in force: weakening it is what counts.
    sim.send("update", &mode_set(&older, "PERMISSIVE"));
    check(
        sim.lines(),
        &[
            "pending mesh_security_drift PeerAuthentication/strict-mtls",
            "firing mesh_security_drift PeerAuthentication/strict-mtls",
        ],
    );
}

#[test]
fn a_policy_with_a_selector_in_the_root_namespace_is_ignored_as_istio_ignores_it() {
    let mut sim = Sim::new();
    // The workload policy of Istio's three-level test data, moved into the root namespace.
    let ignored = live(
        istio(LEVELS, 2),
        "pa-root-workload",
        "istio-system",
        "2026-01-01T00:00:00Z",
    );
    sim.send("add", &ignored);
    sim.send("update", &mode_set(&ignored, "DISABLE"));
    check(sim.lines(), &[]);
}

#[test]
fn a_weaker_namespace_policy_is_one_alert_not_one_per_inheriting_workload_policy() {
    let mut sim = Sim::new();
    let mesh = live(
        istio(LEVELS, 0),
        "pa-mesh",
        "istio-system",
        "2026-01-01T00:00:00Z",
    );
    let namespace = live(istio(LEVELS, 1), "pa-ns", "foo", "2026-01-02T00:00:00Z");
    let workload = live(istio(LEVELS, 2), "pa-wl", "foo", "2026-01-03T00:00:00Z");
    for object in [&mesh, &namespace, &workload] {
        sim.send("add", object);
    }
    sim.send("update", &mode_set(&namespace, "PERMISSIVE"));
    check(
        sim.lines(),
        &[
            "pending mesh_security_drift PeerAuthentication/default-foo",
            "firing mesh_security_drift PeerAuthentication/default-foo",
        ],
    );
    // The workload policy inherits the namespace's mode: it is PERMISSIVE already, so writing
    // PERMISSIVE into it weakens nothing (no second alert for one cause).
    sim.send("update", &mode_set(&workload, "PERMISSIVE"));
    assert_eq!(
        sim.lines()
            .iter()
            .filter(|line| line.contains("workload"))
            .count(),
        0,
        "{:?}",
        sim.lines()
    );
    // The mesh-wide policy going PERMISSIVE → DISABLE is its own alert.
    sim.send("update", &mode_set(&mesh, "DISABLE"));
    assert!(sim
        .lines()
        .contains(&"firing mesh_security_drift PeerAuthentication/default-mesh".to_string()));
}

#[test]
fn a_baseline_manifest_is_the_reference_from_the_first_sight() {
    let mut manifests = drift_core::manifest::Manifests::default();
    manifests
        .add_yaml(
            "git/mesh.yaml",
            "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata:\n  name: strict-mtls\n  namespace: team\nspec:\n  mtls:\n    mode: STRICT\n",
        )
        .unwrap();
    let rules = drift_core::classify::Rules::default().with_baseline(
        drift_core::classify::baseline::Baseline::from_manifests(&manifests),
    );
    let mut sim = Sim::with_compiled(rules);
    let mut permissive = live(istio(STRICT, 0), "pa-b", "team", "2026-01-01T00:00:00Z");
    permissive["spec"]["mtls"]["mode"] = json!("PERMISSIVE");
    sim.send("add", &permissive);
    let firing: Vec<String> = sim
        .lines()
        .into_iter()
        .filter(|line| line.contains("mesh_security_drift"))
        .collect();
    check(
        firing,
        &[
            "pending mesh_security_drift PeerAuthentication/strict-mtls",
            "firing mesh_security_drift PeerAuthentication/strict-mtls",
        ],
    );
    assert_summary(
        &sim,
        "mesh_security_drift",
        "weakens mTLS for namespace team: every port STRICT → PERMISSIVE",
        "(against the mode its baseline manifest sets)",
    );
    // Back to what Git says: resolved at that event.
    sim.send("update", &mode_set(&permissive, "STRICT"));
    assert!(sim
        .lines()
        .contains(&"resolved mesh_security_drift PeerAuthentication/strict-mtls".to_string()));
}
