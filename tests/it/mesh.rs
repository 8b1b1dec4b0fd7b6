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
    metadata.insert(
        "managedFields".into(),
        json!([{"manager": "argocd-controller", "operation": "Apply",
                "apiVersion": api_version, "time": created,
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]),
    );
    // The next version of the run's one counter: a delete's version must follow the adds'.
    bump(&mut object);
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

#[test]
fn a_newer_workload_policy_for_workloads_an_older_one_selects_is_not_in_force() {
    let mut sim = Sim::new();
    let namespace = live(istio(LEVELS, 1), "pa-ns", "foo", "2026-01-01T00:00:00Z");
    let older = live(istio(LEVELS, 2), "pa-wl-old", "foo", "2026-01-02T00:00:00Z");
    // Same selector (app: a) and one more label: it selects a subset of the older one's pods.
    let mut newer = live(istio(LEVELS, 2), "pa-wl-new", "foo", "2026-01-03T00:00:00Z");
    newer["metadata"]["name"] = json!("workload-2");
    newer["spec"]["selector"]["matchLabels"]["tier"] = json!("web");
    newer["spec"]["mtls"] = json!({"mode": "STRICT"});
    for object in [&namespace, &older, &newer] {
        sim.send("add", object);
    }
    sim.send("update", &mode_set(&newer, "DISABLE"));
    check(sim.lines(), &[]);
    // The older one is what Istio applies: weakening it counts.
    sim.send("update", &mode_set(&older, "DISABLE"));
    assert!(sim
        .lines()
        .contains(&"firing mesh_security_drift PeerAuthentication/workload".to_string()));
}

#[test]
fn a_removed_strict_policy_stays_firing_past_the_tombstones_retention_until_restored() {
    let mut sim = Sim::new();
    let mesh = live(
        istio(LEVELS, 0),
        "pa-mesh",
        "istio-system",
        "2026-01-01T00:00:00Z",
    );
    let namespace = live(istio(LEVELS, 1), "pa-ns", "foo", "2026-01-02T00:00:00Z");
    sim.send("add", &mesh);
    sim.send("add", &namespace);
    sim.send("delete", &changed(&namespace, |_| {}));
    check(
        sim.lines(),
        &[
            "pending mesh_security_drift PeerAuthentication/default-foo",
            "firing mesh_security_drift PeerAuthentication/default-foo",
        ],
    );
    // Seven hours later (tombstones go after six) mTLS is still weak: still firing.
    sim.wait(7 * 3600);
    assert!(
        !sim.lines()
            .iter()
            .any(|line| line.starts_with("resolved mesh_security_drift")),
        "{:?}",
        sim.lines()
    );
    // The tombstone the drift holds is past its retention, and does not make the writer's
    // next wake-up "now" (it would wake round after round for nothing).
    let now = T0 + sim.elapsed_seconds() * 1000;
    let objects = sim.engine().object_count();
    assert!(
        sim.engine().next_deadline().is_none_or(|at| at > now),
        "{:?} at {now}",
        sim.engine().next_deadline()
    );
    // The mesh-wide policy made STRICT: the namespace is STRICT again, resolved.
    let mut strict_mesh = mode_set(&mesh, "STRICT");
    strict_mesh["metadata"]["uid"] = json!("pa-mesh");
    sim.send("update", &strict_mesh);
    assert!(sim
        .lines()
        .contains(&"resolved mesh_security_drift PeerAuthentication/default-foo".to_string()));
    // Resolved, it holds the tombstone no longer: due at once, and forgotten by the next round.
    assert!(sim.engine().next_deadline().is_some_and(|at| at <= now));
    sim.wait(0);
    assert_eq!(sim.engine().object_count(), objects - 1);
    assert!(sim.engine().next_deadline().is_none_or(|at| at > now));
}

/// A Namespace as the API server returns it, labelled `labels`.
fn namespace(labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": "myapp", "uid": "ns-myapp", "resourceVersion": "1",
                        "creationTimestamp": "2026-01-01T00:00:00Z", "labels": labels,
                        "managedFields": [{"manager": "kubectl-create", "operation": "Update",
                                           "apiVersion": "v1", "time": "2026-01-01T00:00:00Z",
                                           "fieldsType": "FieldsV1",
                                           "fieldsV1": {"f:metadata": {"f:labels": {}}}}]},
           "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
}

#[test]
fn injection_turned_on_is_info_a_new_revision_a_warning_and_only_a_loss_is_critical() {
    let mut sim = Sim::new();
    // The webapp's Service makes `myapp` a namespace where Knative runs.
    sim.send("add", &service());
    let unlabelled = namespace(json!({}));
    sim.send("add", &unlabelled);
    let enabled = changed(&unlabelled, |o| {
        o["metadata"]["labels"] = json!({"istio-injection": "enabled"})
    });
    sim.send("update", &enabled);
    assert_eq!(
        sim.last("mesh_security_drift").drift.severity,
        drift_model::Severity::Info
    );
    assert_summary(
        &sim,
        "mesh_security_drift",
        "no injection label → istio-injection=enabled",
        "new pods of its Revisions get a sidecar now",
    );
    // Back to the first sight: resolved; then a revision label replaces the default injector.
    sim.send(
        "update",
        &changed(&enabled, |o| o["metadata"]["labels"] = json!({})),
    );
    let revision = changed(&unlabelled, |o| {
        o["metadata"]["labels"] = json!({"istio.io/rev": "1-22"})
    });
    sim.send("update", &revision);
    sim.send(
        "update",
        &changed(&revision, |o| {
            o["metadata"]["labels"] = json!({"istio.io/rev": "1-23"})
        }),
    );
    // Against the first sight (unlabelled), a revision label is still a gain: info.
    assert_eq!(
        sim.last("mesh_security_drift").drift.severity,
        drift_model::Severity::Info
    );
}

#[test]
fn the_root_namespace_is_istios_own_setting() {
    // A managed mesh's root namespace (AKS: aks-istio-system): a policy with a selector there is
    // ignored by Istio, so editing it is quiet; under the default root it is a workload policy.
    let in_aks = |sim: &mut Sim| {
        let ignored = live(
            istio(LEVELS, 2),
            "pa-aks-workload",
            "aks-istio-system",
            "2026-01-01T00:00:00Z",
        );
        let strict = changed(&ignored, |o| o["spec"]["mtls"] = json!({"mode": "STRICT"}));
        sim.send("add", &strict);
        sim.send("update", &mode_set(&strict, "DISABLE"));
    };
    let mut managed = Sim::with_rules("mesh:\n  rootNamespace: aks-istio-system\n");
    in_aks(&mut managed);
    check(managed.lines(), &[]);
    let mut default = Sim::new();
    in_aks(&mut default);
    assert!(default
        .lines()
        .contains(&"firing mesh_security_drift PeerAuthentication/workload".to_string()));
}
