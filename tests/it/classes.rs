//! Data-driven drift scenarios built from the real Knative objects in `tests/fixtures/knative`:
//! each class fires on its drift and resolves when it clears; benign churn fires nothing.

use serde_json::json;

use crate::scenario::*;

// ---- generation_lag --------------------------------------------------------------------------

#[test]
fn generation_lag_fires_past_grace_and_resolves() {
    let mut sim = Sim::new();
    let stuck = changed(&service(), |s| s["metadata"]["generation"] = json!(2));
    sim.send("update", &stuck);
    sim.wait(299);
    check(sim.notified(), &[]);
    sim.wait(2);
    let caught_up = changed(&stuck, |s| s["status"]["observedGeneration"] = json!(2));
    sim.send("update", &caught_up);
    check(
        sim.lines(),
        &[
            "pending generation_lag Service/knative-webapp",
            "firing generation_lag Service/knative-webapp",
            "resolved generation_lag Service/knative-webapp",
        ],
    );
    assert!(sim
        .last("generation_lag")
        .drift
        .evidence
        .summary
        .contains("generation 2 but status.observedGeneration is 1"));
}

#[test]
fn generation_lag_within_grace_is_benign() {
    let mut sim = Sim::new();
    let mut deployment = deployment();
    sim.send("add", &deployment);
    // The autoscaler scales: generation bumps, kube-controller-manager catches up a moment later.
    for replicas in [1, 3, 0] {
        deployment = changed(&deployment, |d| {
            d["spec"]["replicas"] = json!(replicas);
            let generation = d["metadata"]["generation"].as_i64().unwrap() + 1;
            d["metadata"]["generation"] = json!(generation);
        });
        sim.send("update", &deployment);
        sim.wait(2);
        let generation = deployment["metadata"]["generation"].clone();
        deployment = changed(&deployment, |d| {
            d["status"]["observedGeneration"] = generation
        });
        sim.send("update", &deployment);
        sim.wait(30);
    }
    sim.wait(3600);
    check(sim.notified(), &[]);
}

// ---- not_ready --------------------------------------------------------------------------------

#[test]
fn not_ready_names_the_failing_condition() {
    let mut sim = Sim::new();
    let failed: serde_json::Value = crate::support::fixture_yaml(
        "serving/redhat-developer-vscode-knative__test-servingTree-singleServiceFailedRevisionRevisionList.yaml",
    )["items"][0]
        .clone();
    sim.send("add", &failed);
    sim.wait(181);
    let fired = sim.last("not_ready");
    assert_eq!(fired.drift.evidence.facts["reason"], "ContainerMissing");
    assert!(
        fired
            .drift
            .evidence
            .summary
            .contains("ContainerHealthy=False (ContainerMissing)"),
        "{}",
        fired.drift.evidence.summary
    );
    let healthy = changed(&failed, |r| {
        r["status"]["conditions"] = json!([
            {"type": "ContainerHealthy", "status": "True"},
            {"type": "Ready", "status": "True"},
            {"type": "ResourcesAvailable", "status": "True"}
        ]);
    });
    sim.send("update", &healthy);
    check(
        sim.notified(),
        &[
            "firing not_ready Revision/example-2fvz4",
            "resolved not_ready Revision/example-2fvz4",
        ],
    );
}

#[test]
fn transient_not_ready_within_grace_and_scale_to_zero_are_benign() {
    let mut sim = Sim::new();
    let ready = revision();
    sim.send("add", &ready);
    let starting = changed(&ready, |r| {
        r["status"]["conditions"][2] =
            json!({"type": "Ready", "status": "Unknown", "reason": "Deploying"});
    });
    sim.send("update", &starting);
    sim.wait(45);
    let ready_again = changed(&starting, |r| {
        r["status"]["conditions"][2] = json!({"type": "Ready", "status": "True"})
    });
    sim.send("update", &ready_again);
    sim.wait(3600);
    // The fixture Revision is scaled to zero (Active=False NoTraffic, severity Info): not a failure.
    check(sim.notified(), &[]);
}

// ---- revision_not_ready ----------------------------------------------------------------------

#[test]
fn revision_not_ready_fires_for_the_failed_service() {
    let mut sim = Sim::new();
    let failed = crate::support::fixture_yaml(
        "serving/redhat-developer-vscode-knative__test-servingTree-singleServiceFailedRevisionServiceList.yaml",
    )["items"][0]
        .clone();
    sim.send("add", &failed);
    sim.wait(301);
    let notified = sim.notified();
    assert!(
        notified.contains(&"firing revision_not_ready Service/example".to_string()),
        "{notified:?}"
    );
    let drift = &sim.last("revision_not_ready").drift;
    assert_eq!(
        drift.evidence.facts["latestCreatedRevisionName"],
        "example-75w7v"
    );
    assert!(drift.evidence.summary.contains("latest ready is none"));
}

#[test]
fn revision_not_ready_resolves_when_latest_becomes_ready() {
    let mut sim = Sim::new();
    let rolling = changed(&service(), |s| {
        s["status"]["latestCreatedRevisionName"] = json!("knative-webapp-00002")
    });
    sim.send("update", &rolling);
    sim.wait(400);
    let done = changed(&rolling, |s| {
        s["status"]["latestReadyRevisionName"] = json!("knative-webapp-00002")
    });
    sim.send("update", &done);
    check(
        sim.notified(),
        &[
            "firing revision_not_ready Service/knative-webapp",
            "resolved revision_not_ready Service/knative-webapp",
        ],
    );
    assert!(sim
        .last("revision_not_ready")
        .drift
        .evidence
        .hint
        .as_deref()
        .unwrap_or_default()
        .contains("--traffic knative-webapp-00001=100"));
}

// ---- traffic_drift -----------------------------------------------------------------------------

#[test]
fn traffic_drift_when_served_split_differs_from_spec() {
    let mut sim = Sim::new();
    let drifted = changed(&service(), |s| {
        s["status"]["traffic"] = json!([
            {"percent": 50, "revisionName": "knative-webapp-00001"},
            {"percent": 50, "revisionName": "knative-webapp-00000"}
        ]);
    });
    sim.send("update", &drifted);
    sim.wait(121);
    let fixed = changed(&drifted, |s| {
        s["status"]["traffic"] = json!([{"latestRevision": true, "percent": 100, "revisionName": "knative-webapp-00001"}]);
    });
    sim.send("update", &fixed);
    check(
        sim.notified(),
        &[
            "firing traffic_drift Service/knative-webapp",
            "resolved traffic_drift Service/knative-webapp",
        ],
    );
    let drift = &sim.last("traffic_drift").drift;
    assert!(
        drift
            .evidence
            .summary
            .contains("knative-webapp-00001: spec 100% vs served 50%"),
        "{}",
        drift.evidence.summary
    );
    assert!(drift
        .evidence
        .hint
        .as_deref()
        .unwrap()
        .starts_with("kn service update knative-webapp --namespace myapp --traffic @latest=100"));
}

#[test]
fn traffic_drift_when_a_tag_is_missing() {
    let mut sim = Sim::new();
    let service = crate::support::fixture_yaml(
        "serving/redhat-developer-vscode-knative__test-servingTree-singleServiceServiceList.yaml",
    )["items"][0]
        .clone();
    sim.send("add", &service);
    sim.wait(600);
    check(sim.notified(), &[]);
    let lost_tag = changed(&service, |s| {
        s["status"]["traffic"]
            .as_array_mut()
            .unwrap()
            .retain(|target| target["tag"] != "old");
    });
    sim.send("update", &lost_tag);
    sim.wait(121);
    check(sim.notified(), &["firing traffic_drift Service/example"]);
    assert!(sim
        .last("traffic_drift")
        .drift
        .evidence
        .summary
        .contains("tag old is missing from status"));
}

#[test]
fn route_edited_away_from_its_service_is_traffic_drift() {
    let mut sim = Sim::new();
    sim.send("add", &service());
    sim.send("add", &route());
    let edited = changed(&route(), |r| {
        r["spec"]["traffic"] = json!([{"revisionName": "knative-webapp-00001", "percent": 100}]);
        r["metadata"]["generation"] = json!(2);
        r["status"]["observedGeneration"] = json!(2);
        r["status"]["traffic"] = json!([{"revisionName": "knative-webapp-00001", "percent": 100}]);
    });
    sim.send("update", &edited);
    sim.wait(121);
    let restored = changed(&edited, |r| r["spec"] = route()["spec"].clone());
    sim.send("update", &restored);
    check(
        sim.notified(),
        &[
            "firing traffic_drift Route/knative-webapp",
            "resolved traffic_drift Route/knative-webapp",
        ],
    );
}

#[test]
fn rollout_by_a_trusted_manager_is_benign() {
    let mut sim = Sim::new();
    let mut service = service();
    let mut route = route();
    let mut configuration = configuration();
    sim.send("add", &service);
    sim.send("add", &configuration);
    sim.send("add", &route);
    sim.send("add", &revision());
    sim.send("add", &deployment());
    // A new template through Argo CD: generation 2, a new Revision, traffic moves to it.
    service = changed(&service, |s| {
        s["metadata"]["generation"] = json!(2);
        s["spec"]["template"]["spec"]["containers"][0]["image"] =
            json!("projects.registry.vmware.com/tanzu_ese_poc/rguske/knative-webapp:v2");
        written_by(
            s,
            "argocd-controller",
            "Apply",
            json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {}}}}}),
            "2023-10-09T21:40:05Z",
        );
    });
    sim.send("update", &service);
    sim.wait(1);
    configuration = changed(&configuration, |c| {
        c["metadata"]["generation"] = json!(2);
        c["spec"]["template"] = service["spec"]["template"].clone();
    });
    sim.send("update", &configuration);
    let mut second = revision();
    second["metadata"]["name"] = json!("knative-webapp-00002");
    second["metadata"]["uid"] = json!("rev-2-uid");
    second["metadata"]["labels"]["serving.knative.dev/routingState"] = json!("pending");
    second["status"]["conditions"] =
        json!([{"type": "Ready", "status": "Unknown", "reason": "Deploying"}]);
    bump(&mut second);
    sim.send("add", &second);
    sim.wait(8);
    let second = changed(&second, |r| {
        r["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        r["metadata"]["labels"]["serving.knative.dev/routingState"] = json!("active");
    });
    sim.send("update", &second);
    configuration = changed(&configuration, |c| {
        c["status"]["observedGeneration"] = json!(2);
        c["status"]["latestCreatedRevisionName"] = json!("knative-webapp-00002");
        c["status"]["latestReadyRevisionName"] = json!("knative-webapp-00002");
    });
    sim.send("update", &configuration);
    route = changed(&route, |r| {
        r["status"]["traffic"][0]["revisionName"] = json!("knative-webapp-00002")
    });
    sim.send("update", &route);
    service = changed(&service, |s| {
        s["status"]["observedGeneration"] = json!(2);
        s["status"]["latestCreatedRevisionName"] = json!("knative-webapp-00002");
        s["status"]["latestReadyRevisionName"] = json!("knative-webapp-00002");
        s["status"]["traffic"][0]["revisionName"] = json!("knative-webapp-00002");
    });
    sim.send("update", &service);
    let old = changed(&revision(), |r| {
        r["metadata"]["labels"]["serving.knative.dev/routingState"] = json!("reserve")
    });
    sim.send("update", &old);
    sim.wait(7200);
    check(sim.notified(), &[]);
}

#[test]
fn gradual_rollout_is_benign() {
    let mut sim = Sim::new();
    let rolling = changed(&route(), |r| {
        r["status"]["traffic"] = json!([
            {"percent": 80, "revisionName": "knative-webapp-00001"},
            {"percent": 20, "revisionName": "knative-webapp-00002"}
        ]);
        r["status"]["conditions"][2] =
            json!({"type": "IngressReady", "status": "Unknown", "reason": "RolloutInProgress"});
        r["metadata"]["ownerReferences"] = json!([]);
    });
    sim.send("add", &configuration());
    sim.send("update", &rolling);
    sim.wait(600);
    check(sim.notified(), &[]);
}

// ---- image_drift and manual_edit on a Knative-managed Deployment -----------------------------

#[test]
fn deployment_image_changed_by_hand_is_image_drift_and_a_critical_manual_edit() {
    let mut sim = Sim::new();
    sim.send("add", &revision());
    let deployment = deployment();
    sim.send("add", &deployment);
    let edited = changed(&deployment, |d| {
        d["spec"]["template"]["spec"]["containers"][0]["image"] =
            json!("docker.io/attacker/webapp:latest");
        written_by(
            d,
            "kubectl-set",
            "Update",
            json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"user-container\"}": {"f:image": {}}}}}}}),
            "2023-10-09T21:41:00Z",
        );
    });
    sim.send("update", &edited);
    let manual = sim.last("manual_edit");
    assert_eq!(
        manual.drift.state.as_str(),
        "firing",
        "manual edits fire at once"
    );
    assert_eq!(manual.drift.severity.as_str(), "critical");
    let actor = manual.drift.evidence.actor.clone().unwrap();
    assert_eq!(
        (actor.manager.as_str(), actor.trusted),
        ("kubectl-set", false)
    );
    sim.wait(61);
    let image = &sim.last("image_drift").drift;
    assert!(image.evidence.summary.contains("runs docker.io/attacker/webapp:latest but its Revision knative-webapp-00001 specifies projects.registry"));
    assert!(image
        .evidence
        .hint
        .as_deref()
        .unwrap()
        .contains("kubectl -n myapp patch deployment knative-webapp-00001-deployment --type=json"));
    // The Knative controller puts the digest back.
    let reverted = changed(&edited, |d| {
        d["spec"]["template"]["spec"]["containers"][0]["image"] = json!(DIGEST);
        written_by(
            d,
            "controller",
            "Update",
            json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"user-container\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}}),
            "2023-10-09T21:42:02Z",
        );
    });
    sim.send("update", &reverted);
    check(
        sim.notified(),
        &[
            "firing manual_edit Deployment/knative-webapp-00001-deployment",
            "firing image_drift Deployment/knative-webapp-00001-deployment",
            "resolved image_drift Deployment/knative-webapp-00001-deployment",
            "resolved manual_edit Deployment/knative-webapp-00001-deployment",
        ],
    );
}

#[test]
fn image_drift_holds_through_status_churn_and_follows_the_revision_digest() {
    let mut sim = Sim::new();
    let revision = revision();
    sim.send("add", &revision);
    let deployment = deployment();
    sim.send("add", &deployment);
    let wrong = changed(&deployment, |d| {
        d["spec"]["template"]["spec"]["containers"][0]["image"] =
            json!("docker.io/attacker/webapp:latest");
    });
    sim.send("update", &wrong);
    sim.wait(61);
    // Status churn of the Deployment and of its Revision changes nothing about the images.
    let mut churned = wrong.clone();
    for replicas in [2, 1] {
        churned = changed(&churned, |d| d["status"]["replicas"] = json!(replicas));
        sim.send("update", &churned);
    }
    let churned_revision = changed(&revision, |r| {
        r["status"]["conditions"][0]["lastTransitionTime"] = json!("2023-10-09T21:50:00Z")
    });
    sim.send("update", &churned_revision);
    sim.wait(600);
    check(
        sim.notified(),
        &["firing image_drift Deployment/knative-webapp-00001-deployment"],
    );
    // The Revision's digest moves to what the Deployment runs: its workloads are re-checked
    // (the Revision's own digest change is a drift of its own).
    let moved = changed(&churned_revision, |r| {
        r["status"]["containerStatuses"][0]["imageDigest"] =
            json!("docker.io/attacker/webapp:latest");
    });
    sim.send("update", &moved);
    sim.wait(61);
    check(
        sim.notified(),
        &[
            "firing image_drift Deployment/knative-webapp-00001-deployment",
            "resolved image_drift Deployment/knative-webapp-00001-deployment",
            "firing image_drift Revision/knative-webapp-00001",
        ],
    );
}

#[test]
fn revision_digest_change_is_image_drift() {
    let mut sim = Sim::new();
    let revision = revision();
    sim.send("add", &revision);
    let moved = changed(&revision, |r| {
        r["status"]["containerStatuses"][0]["imageDigest"] = json!("projects.registry.vmware.com/tanzu_ese_poc/rguske/knative-webapp@sha256:0000000000000000000000000000000000000000000000000000000000000bad");
    });
    sim.send("update", &moved);
    sim.wait(61);
    let restored = changed(&moved, |r| r["status"] = revision["status"].clone());
    sim.send("update", &restored);
    check(
        sim.notified(),
        &[
            "firing image_drift Revision/knative-webapp-00001",
            "resolved image_drift Revision/knative-webapp-00001",
        ],
    );
}

#[test]
fn pods_running_the_revision_digest_are_benign() {
    let mut sim = Sim::new();
    sim.send("add", &revision());
    sim.send("add", &deployment());
    for index in 0..5 {
        let pod = pod(&format!("knative-webapp-00001-deployment-7d9f-{index}"));
        sim.send("add", &pod);
        sim.wait(10);
        sim.send("delete", &changed(&pod, |_| {}));
    }
    sim.wait(3600);
    check(sim.notified(), &[]);
}

// ---- manual_edit on a Knative Service --------------------------------------------------------

#[test]
fn kubectl_edit_of_traffic_is_attributed_and_resolved_when_gitops_reapplies() {
    let mut sim = Sim::new();
    let original = service();
    sim.send("add", &original);
    let edited = changed(&original, |s| {
        s["spec"]["traffic"] = json!([{"latestRevision": true, "percent": 90}, {"revisionName": "knative-webapp-00000", "percent": 10}]);
        s["metadata"]["annotations"]["serving.knative.dev/lastModifier"] =
            json!("jane@example.com");
        written_by(
            s,
            "kubectl-edit",
            "Update",
            json!({"f:spec": {"f:traffic": {}}}),
            "2023-10-09T21:45:00Z",
        );
        if let Some(entries) = s["metadata"]["managedFields"].as_array_mut() {
            // kn no longer owns traffic once kubectl-edit wrote it.
            entries[0]["fieldsV1"]["f:spec"]
                .as_object_mut()
                .unwrap()
                .remove("f:traffic");
        }
    });
    sim.send("update", &edited);
    let fired = sim.last("manual_edit").drift.clone();
    let actor = fired.evidence.actor.clone().unwrap();
    assert_eq!(actor.manager, "kubectl-edit");
    assert_eq!(actor.user.as_deref(), Some("jane@example.com"));
    assert_eq!(fired.severity.as_str(), "warning");
    assert!(
        fired
            .evidence
            .summary
            .contains("by kubectl-edit (Update), user jane@example.com at 2023-10-09T21:45:00Z"),
        "{}",
        fired.evidence.summary
    );
    let hint = fired.evidence.hint.unwrap();
    assert!(
        hint.starts_with(
            "kubectl -n myapp patch services.serving.knative.dev knative-webapp --type=json -p '["
        ),
        "{hint}"
    );
    assert!(fired
        .evidence
        .changes
        .iter()
        .any(|change| change.path == "/spec/traffic/0/percent"
            && change.before == Some(json!(100))
            && change.after == Some(json!(90))));
    // Argo CD syncs the Git version back.
    let reapplied = changed(&edited, |s| {
        s["spec"]["traffic"] = original["spec"]["traffic"].clone();
        written_by(
            s,
            "argocd-controller",
            "Apply",
            json!({"f:spec": {"f:traffic": {}}}),
            "2023-10-09T21:50:00Z",
        );
    });
    sim.send("update", &reapplied);
    check(
        sim.notified(),
        &[
            "firing manual_edit Service/knative-webapp",
            "resolved manual_edit Service/knative-webapp",
        ],
    );
}

#[test]
fn changes_by_trusted_managers_and_first_sight_are_not_manual_edits() {
    let mut sim = Sim::new();
    // First sight of an object already edited by a person: a baseline, not a change.
    let mut seen_edited = service();
    written_by(
        &mut seen_edited,
        "kubectl-edit",
        "Update",
        json!({"f:spec": {"f:traffic": {}}}),
        "2023-10-09T21:30:00Z",
    );
    sim.send("add", &seen_edited);
    let by_flux = changed(&seen_edited, |s| {
        s["spec"]["template"]["metadata"]["annotations"]["client.knative.dev/updateTimestamp"] =
            json!("2023-10-10T00:00:00Z");
        written_by(
            s,
            "kustomize-controller",
            "Apply",
            json!({"f:spec": {"f:template": {"f:metadata": {"f:annotations": {}}}}}),
            "2023-10-10T00:00:00Z",
        );
    });
    sim.send("update", &by_flux);
    // Status-only and metadata-only churn by the controller.
    for index in 0..20 {
        let churn = changed(&by_flux, |s| {
            s["status"]["conditions"][1]["lastTransitionTime"] =
                json!(format!("2023-10-10T00:00:{index:02}Z"));
            s["metadata"]["labels"] = json!({"heartbeat": index.to_string()});
        });
        sim.send("update", &churn);
    }
    sim.wait(7200);
    check(sim.notified(), &[]);
}

// ---- config_drift -------------------------------------------------------------------------------

#[test]
fn config_autoscaler_changed_by_hand_reports_the_key() {
    let mut sim = Sim::new();
    let shipped = config_autoscaler();
    sim.send("add", &shipped);
    let edited = changed(&shipped, |c| {
        c["data"]["min-scale"] = json!("1");
        written_by(
            c,
            "kubectl-edit",
            "Update",
            json!({"f:data": {"f:min-scale": {}}}),
            "2023-10-09T22:00:00Z",
        );
    });
    sim.send("update", &edited);
    let drift = sim.last("config_drift").drift.clone();
    assert_eq!(drift.state.as_str(), "firing");
    assert_eq!(drift.severity.as_str(), "warning");
    assert!(
        drift
            .evidence
            .summary
            .contains("data changed by kubectl-edit (Update)"),
        "{}",
        drift.evidence.summary
    );
    assert!(
        drift.evidence.summary.contains("min-scale added (1)"),
        "{}",
        drift.evidence.summary
    );
    assert_eq!(drift.evidence.facts["key/min-scale"], "added");
    assert!(drift
        .evidence
        .hint
        .unwrap()
        .contains(r#"{"op":"remove","path":"/data/min-scale"}"#));
    let reverted = changed(&edited, |c| {
        c["data"].as_object_mut().unwrap().remove("min-scale");
    });
    sim.send("update", &reverted);
    check(
        sim.notified(),
        &[
            "firing config_drift ConfigMap/config-autoscaler",
            "resolved config_drift ConfigMap/config-autoscaler",
        ],
    );
    assert_eq!(
        sim.last("config_drift").drift.resolution.as_deref(),
        Some("edits reverted")
    );
}

#[test]
fn example_only_edit_is_reported_as_changing_nothing() {
    let mut sim = Sim::new();
    let shipped = config_autoscaler();
    sim.send("add", &shipped);
    let edited = changed(&shipped, |c| {
        let text = c["data"]["_example"]
            .as_str()
            .unwrap()
            .replace("min-scale: \"0\"", "min-scale: \"3\"");
        c["data"]["_example"] = json!(text);
        c["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove("knative.dev/example-checksum");
        written_by(
            c,
            "kubectl-edit",
            "Update",
            json!({"f:data": {"f:_example": {}}}),
            "2023-10-09T22:00:00Z",
        );
    });
    sim.send("update", &edited);
    let drift = &sim.last("config_drift").drift;
    assert_eq!(drift.severity.as_str(), "info");
    assert!(drift
        .evidence
        .summary
        .contains("Knative ignores _example, so this changes nothing"));
}

#[test]
fn config_change_by_the_operator_is_not_drift_and_unwatched_config_maps_are_manual_edits() {
    let mut sim = Sim::new();
    let shipped = config_autoscaler();
    sim.send("add", &shipped);
    let by_operator = changed(&shipped, |c| {
        c["data"]["enable-scale-to-zero"] = json!("false");
        written_by(
            c,
            "knative-operator",
            "Update",
            json!({"f:data": {"f:enable-scale-to-zero": {}}}),
            "2023-10-09T22:00:00Z",
        );
    });
    sim.send("update", &by_operator);
    let mut app_config = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app-settings", "namespace": "myapp", "uid": "cm-app", "resourceVersion": "5"},
        "data": {"color": "blue"}});
    written_by(
        &mut app_config,
        "helm-controller",
        "Apply",
        json!({"f:data": {"f:color": {}}}),
        "2023-10-09T21:00:00Z",
    );
    sim.send("add", &app_config);
    let edited = changed(&app_config, |c| {
        c["data"]["color"] = json!("red");
        written_by(
            c,
            "kubectl-patch",
            "Update",
            json!({"f:data": {"f:color": {}}}),
            "2023-10-09T22:10:00Z",
        );
    });
    sim.send("update", &edited);
    check(
        sim.notified(),
        &["firing manual_edit ConfigMap/app-settings"],
    );
}

// ---- replica_drift --------------------------------------------------------------------------------

#[test]
fn replica_drift_past_grace_and_scaling_within_grace_is_benign() {
    let mut sim = Sim::new();
    let revision = revision();
    sim.send("add", &revision);
    // Scale up from zero: desired 3, actual catches up within a minute.
    let scaling = changed(&revision, |r| r["status"]["desiredReplicas"] = json!(3));
    sim.send("update", &scaling);
    sim.wait(40);
    let scaled = changed(&scaling, |r| r["status"]["actualReplicas"] = json!(3));
    sim.send("update", &scaled);
    sim.wait(600);
    check(sim.notified(), &[]);
    // Stuck: desired 5, only 2 come up.
    let stuck = changed(&scaled, |r| {
        r["status"]["desiredReplicas"] = json!(5);
        r["status"]["actualReplicas"] = json!(2);
    });
    sim.send("update", &stuck);
    sim.wait(301);
    let fixed = changed(&stuck, |r| r["status"]["actualReplicas"] = json!(5));
    sim.send("update", &fixed);
    check(
        sim.notified(),
        &[
            "firing replica_drift Revision/knative-webapp-00001",
            "resolved replica_drift Revision/knative-webapp-00001",
        ],
    );
}

#[test]
fn below_min_scale_is_replica_drift() {
    let mut sim = Sim::new();
    let revision = changed(&revision(), |r| {
        r["metadata"]["annotations"]["autoscaling.knative.dev/min-scale"] = json!("2");
    });
    sim.send("add", &revision);
    sim.wait(301);
    check(
        sim.notified(),
        &["firing replica_drift Revision/knative-webapp-00001"],
    );
    assert!(sim
        .last("replica_drift")
        .drift
        .evidence
        .summary
        .contains("below min-scale 2"));
}

// ---- unexpected_delete ------------------------------------------------------------------------

#[test]
fn deleted_service_fires_and_recreation_resolves() {
    let mut sim = Sim::new();
    let service = service();
    sim.send("add", &service);
    sim.send("delete", &changed(&service, |_| {}));
    sim.wait(61);
    let mut recreated = service.clone();
    recreated["metadata"]["uid"] = json!("new-service-uid");
    bump(&mut recreated);
    sim.send("add", &recreated);
    check(
        sim.notified(),
        &[
            "firing unexpected_delete Service/knative-webapp",
            "resolved unexpected_delete Service/knative-webapp",
        ],
    );
    assert_eq!(
        sim.last("unexpected_delete").drift.resolution.as_deref(),
        Some("re-created")
    );
}

#[test]
fn deleted_deployment_while_revision_exists_fires() {
    let mut sim = Sim::new();
    sim.send("add", &revision());
    let deployment = deployment();
    sim.send("add", &deployment);
    sim.send("delete", &changed(&deployment, |_| {}));
    sim.wait(61);
    check(
        sim.notified(),
        &["firing unexpected_delete Deployment/knative-webapp-00001-deployment"],
    );
}

#[test]
fn cascading_delete_in_any_order_reports_only_the_service() {
    let mut sim = Sim::new();
    let objects = [
        service(),
        configuration(),
        route(),
        revision(),
        deployment(),
    ];
    for object in &objects {
        sim.send("add", object);
    }
    // Garbage collection: children's delete events may arrive before the Service's.
    for index in [4, 3, 1, 2, 0] {
        sim.send("delete", &changed(&objects[index], |_| {}));
    }
    sim.wait(3600);
    let notified = sim.notified();
    check(
        notified,
        &["firing unexpected_delete Service/knative-webapp"],
    );
}

#[test]
fn pod_deletion_and_revision_gc_are_normal() {
    let mut sim = Sim::new();
    sim.send("add", &configuration());
    let reserve = changed(&revision(), |r| {
        r["metadata"]["labels"]["serving.knative.dev/routingState"] = json!("reserve")
    });
    sim.send("add", &reserve);
    let pod = pod("knative-webapp-00001-deployment-abc");
    sim.send("add", &pod);
    sim.send("delete", &changed(&pod, |_| {}));
    sim.send("delete", &changed(&reserve, |_| {}));
    sim.wait(3600);
    check(sim.notified(), &[]);
}

// ---- orphan ---------------------------------------------------------------------------------------

#[test]
fn deployment_left_behind_by_its_revision_is_an_orphan() {
    let mut sim = Sim::new();
    let revision = changed(&revision(), |r| {
        r["metadata"]["labels"]["serving.knative.dev/routingState"] = json!("reserve")
    });
    sim.send("add", &revision);
    let deployment = deployment();
    sim.send("add", &deployment);
    sim.send("delete", &changed(&revision, |_| {}));
    sim.wait(599);
    check(sim.notified(), &[]);
    sim.wait(2);
    sim.send("delete", &changed(&deployment, |_| {}));
    check(
        sim.notified(),
        &[
            "firing orphan Deployment/knative-webapp-00001-deployment",
            "resolved orphan Deployment/knative-webapp-00001-deployment",
        ],
    );
}

#[test]
fn deployment_collected_with_its_revision_is_benign() {
    let mut sim = Sim::new();
    let revision = changed(&revision(), |r| {
        r["metadata"]["labels"]["serving.knative.dev/routingState"] = json!("reserve")
    });
    sim.send("add", &revision);
    let deployment = deployment();
    sim.send("add", &deployment);
    sim.send("delete", &changed(&revision, |_| {}));
    sim.wait(3);
    sim.send("delete", &changed(&deployment, |_| {}));
    sim.wait(3600);
    check(sim.notified(), &[]);
}

// ---- baseline_drift -------------------------------------------------------------------------------

fn baseline_rules() -> drift_core::classify::Rules {
    baseline_rules_with("v1")
}

/// The rules with the webapp's manifest in Git at image tag `tag`.
fn baseline_rules_with(tag: &str) -> drift_core::classify::Rules {
    let mut manifests = drift_core::manifest::Manifests::default();
    manifests
        .add_yaml(
            "git/webapp.yaml",
            &format!(
                r#"
apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: knative-webapp
  namespace: myapp
spec:
  template:
    spec:
      containers:
        - image: projects.registry.vmware.com/tanzu_ese_poc/rguske/knative-webapp:{tag}
          ports:
            - containerPort: 80
"#
            ),
        )
        .unwrap();
    drift_core::classify::Rules::default().with_baseline(
        drift_core::classify::baseline::Baseline::from_manifests(&manifests),
    )
}

/// `service` as a trusted pipeline (helm) deploys it with image tag `tag`.
fn deployed_by_helm(service: &serde_json::Value, tag: &str) -> serde_json::Value {
    changed(service, |s| {
        s["spec"]["template"]["spec"]["containers"][0]["image"] = json!(format!(
            "projects.registry.vmware.com/tanzu_ese_poc/rguske/knative-webapp:{tag}"
        ));
        written_by(
            s,
            "helm-controller",
            "Apply",
            json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {}}}}}),
            "2023-10-09T21:50:00Z",
        );
    })
}

#[test]
fn live_service_differing_from_git_is_baseline_drift() {
    let mut sim = Sim::with_compiled(baseline_rules());
    let service = service();
    sim.send("add", &service);
    sim.wait(600);
    check(sim.notified(), &[]);
    // A trusted pipeline deploys an image Git does not have: not a manual edit, but not the
    // desired state either.
    let drifted = deployed_by_helm(&service, "v9");
    sim.send("update", &drifted);
    sim.wait(301);
    sim.send(
        "update",
        &changed(&drifted, |s| s["spec"] = service["spec"].clone()),
    );
    check(
        sim.notified(),
        &[
            "firing baseline_drift Service/knative-webapp",
            "resolved baseline_drift Service/knative-webapp",
        ],
    );
    let drift = &sim.last("baseline_drift").drift;
    assert_eq!(
        drift.evidence.changes[0].path,
        "/spec/template/spec/containers/0/image"
    );
}

/// A Service whose image a Helm release changed away from Git's, its `baseline_drift` firing:
/// the simulation and the drifted object.
fn baseline_drift_firing() -> (Sim, serde_json::Value) {
    let mut sim = Sim::with_compiled(baseline_rules());
    let service = service();
    sim.send("add", &service);
    sim.wait(600);
    let drifted = deployed_by_helm(&service, "v9");
    sim.send("update", &drifted);
    sim.wait(301);
    (sim, drifted)
}

/// The desired state fixed in Git (the manifest now says what runs) and reloaded: the open drift
/// resolves at the reload's re-judge, with no event of the object (a quiet object would
/// otherwise stay firing until something about it changed), and a later status write, which
/// changes nothing the comparison reads, says nothing more.
#[test]
fn a_baseline_drift_fixed_in_git_resolves_at_the_reload() {
    let (mut sim, drifted) = baseline_drift_firing();
    check(
        sim.notified(),
        &["firing baseline_drift Service/knative-webapp"],
    );
    sim.reload_compiled(baseline_rules_with("v9"));
    check(
        sim.notified(),
        &[
            "firing baseline_drift Service/knative-webapp",
            "resolved baseline_drift Service/knative-webapp",
        ],
    );
    sim.send(
        "update",
        &changed(&drifted, |s| {
            s["status"]["conditions"][0]["lastTransitionTime"] = json!("2023-10-09T22:00:00Z")
        }),
    );
    sim.wait(301);
    check(
        sim.notified(),
        &[
            "firing baseline_drift Service/knative-webapp",
            "resolved baseline_drift Service/knative-webapp",
        ],
    );
}

/// A drift that still holds is not touched by status churn: it stays firing through status
/// writes, and reloading the same manifests neither resolves nor re-fires it.
#[test]
fn an_open_baseline_drift_outlives_status_churn_and_a_same_reload() {
    let (mut sim, drifted) = baseline_drift_firing();
    for minute in 0..5 {
        sim.send(
            "update",
            &changed(&drifted, |s| {
                s["status"]["conditions"][0]["lastTransitionTime"] =
                    json!(format!("2023-10-09T22:0{minute}:00Z"))
            }),
        );
        sim.wait(60);
    }
    sim.reload_compiled(baseline_rules());
    sim.wait(301);
    check(
        sim.notified(),
        &["firing baseline_drift Service/knative-webapp"],
    );
    // And the drift is still there to resolve: the manifest fixed, the reload resolves it.
    sim.reload_compiled(baseline_rules_with("v9"));
    check(
        sim.notified(),
        &[
            "firing baseline_drift Service/knative-webapp",
            "resolved baseline_drift Service/knative-webapp",
        ],
    );
}

/// The `baseline_drift` moves of a run, for runs in which other classes also speak.
fn baseline_moves(sim: &Sim) -> Vec<String> {
    sim.notified()
        .into_iter()
        .filter(|line| line.contains("baseline_drift"))
        .collect()
}

/// Each hand edit of a field the manifest leaves to Knative fires after the grace, with the
/// path, Knative's default as the desired value, and where that default came from.
#[test]
fn fields_left_to_knative_are_compared_with_its_defaults() {
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit, &str, serde_json::Value); 5] = [
        (
            "a hand-made 80/20 split",
            |s| {
                s["spec"]["traffic"] = json!([
                    {"revisionName": "knative-webapp-00001", "percent": 80},
                    {"latestRevision": true, "percent": 20}
                ])
            },
            "/spec/traffic",
            json!([{"latestRevision": true, "percent": 100}]),
        ),
        (
            "a cluster-local label",
            |s| {
                s["metadata"]["labels"] =
                    json!({"networking.knative.dev/visibility": "cluster-local"})
            },
            "/metadata/labels/networking.knative.dev~1visibility",
            serde_json::Value::Null,
        ),
        (
            "a min-scale on the template",
            |s| {
                s["spec"]["template"]["metadata"]["annotations"] =
                    json!({"autoscaling.knative.dev/min-scale": "3"})
            },
            "/spec/template/metadata/annotations/autoscaling.knative.dev~1min-scale",
            serde_json::Value::Null,
        ),
        (
            "a longer timeout",
            |s| s["spec"]["template"]["spec"]["timeoutSeconds"] = json!(900),
            "/spec/template/spec/timeoutSeconds",
            json!(300),
        ),
        (
            "a container concurrency",
            |s| s["spec"]["template"]["spec"]["containerConcurrency"] = json!(10),
            "/spec/template/spec/containerConcurrency",
            json!(0),
        ),
    ];
    for (what, edit, path, desired) in cases {
        let mut sim = Sim::with_compiled(baseline_rules());
        let service = service();
        sim.send("add", &service);
        sim.wait(600);
        assert_eq!(
            baseline_moves(&sim),
            Vec::<String>::new(),
            "{what}: clean first"
        );
        let edited = changed(&service, edit);
        sim.send("update", &edited);
        sim.wait(299);
        assert_eq!(
            baseline_moves(&sim),
            Vec::<String>::new(),
            "{what}: within grace"
        );
        sim.wait(2);
        assert_eq!(
            baseline_moves(&sim),
            ["firing baseline_drift Service/knative-webapp"],
            "{what}"
        );
        let evidence = &sim.last("baseline_drift").drift.evidence;
        assert_eq!(evidence.changes.len(), 1, "{what}: {:?}", evidence.changes);
        assert_eq!(evidence.changes[0].path, path, "{what}");
        assert_eq!(
            evidence.changes[0].before,
            (!desired.is_null()).then_some(desired),
            "{what}"
        );
        assert!(
            evidence.summary.contains("is left out of the manifest"),
            "{what}: {}",
            evidence.summary
        );
        sim.send("update", &changed(&edited, |s| *s = service.clone()));
        assert_eq!(
            baseline_moves(&sim),
            [
                "firing baseline_drift Service/knative-webapp",
                "resolved baseline_drift Service/knative-webapp"
            ],
            "{what}: resolves when reverted"
        );
    }
}

/// The cluster's own `config-defaults` moves the default: a timeout of 900 is Knative's default
/// where the ConfigMap says so, and the evidence names the ConfigMap.
#[test]
fn the_clusters_config_defaults_decide_the_default() {
    let mut sim = Sim::with_compiled(baseline_rules());
    let mut config = crate::support::fixture_yaml(
        "configmaps/knative-serving__config-core-configmaps__config-defaults.yaml",
    );
    config["metadata"]["uid"] = json!("config-defaults-uid");
    config["metadata"]["resourceVersion"] = json!("100");
    config["data"]["revision-timeout-seconds"] = json!("900");
    sim.send("add", &config);
    let service = changed(&service(), |s| {
        s["spec"]["template"]["spec"]["timeoutSeconds"] = json!(900)
    });
    sim.send("add", &service);
    sim.wait(600);
    assert_eq!(baseline_moves(&sim), Vec::<String>::new());
    // 450 is neither this cluster's default nor Knative's built-in one (300, which a Service
    // created before the cluster raised its default keeps).
    sim.send(
        "update",
        &changed(&service, |s| {
            s["spec"]["template"]["spec"]["timeoutSeconds"] = json!(450)
        }),
    );
    sim.wait(301);
    let evidence = &sim.last("baseline_drift").drift.evidence;
    assert_eq!(evidence.changes[0].before, Some(json!(900)));
    assert!(
        evidence
            .summary
            .contains("revision-timeout-seconds in knative-serving/config-defaults"),
        "{}",
        evidence.summary
    );
    // Setting config-defaults to 450 makes the Service match again: it is re-compared when
    // the ConfigMap changes, without an event of its own.
    sim.send(
        "update",
        &changed(&config, |c| {
            c["data"]["revision-timeout-seconds"] = json!("450")
        }),
    );
    assert_eq!(
        baseline_moves(&sim),
        [
            "firing baseline_drift Service/knative-webapp",
            "resolved baseline_drift Service/knative-webapp"
        ]
    );
}

// ---- ordering, redelivery, secrets -------------------------------------------------------------

#[test]
fn redelivered_and_out_of_order_events_change_nothing() {
    let mut sim = Sim::new();
    let first = service();
    let stuck = changed(&first, |s| s["metadata"]["generation"] = json!(2));
    let caught_up = changed(&stuck, |s| s["status"]["observedGeneration"] = json!(2));
    let events: Vec<_> = [(&first, "add"), (&stuck, "update"), (&caught_up, "update")]
        .iter()
        .enumerate()
        .map(|(index, (object, verb))| {
            crate::support::structured_event(&format!("e{index}"), verb, object)
        })
        .collect();
    sim.send_event(&events[0]);
    sim.send_event(&events[2]);
    // The older update arrives late, then everything is redelivered.
    sim.send_event(&events[1]);
    for event in &events {
        sim.send_event(event);
    }
    sim.wait(3600);
    check(sim.lines(), &[]);
}

#[test]
fn secret_edits_are_reported_without_values() {
    let mut sim = Sim::new();
    let mut secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "dingtalk", "namespace": "drift-sentinel", "uid": "secret-1", "resourceVersion": "10"},
        "data": {"token": "Q0FOQVJZLW9sZC12YWx1ZQ=="}});
    written_by(
        &mut secret,
        "helm-controller",
        "Apply",
        json!({"f:data": {"f:token": {}}}),
        "2023-10-09T21:00:00Z",
    );
    sim.send("add", &secret);
    let edited = changed(&secret, |s| {
        s["data"]["token"] = json!("Q0FOQVJZLW5ldy12YWx1ZQ==");
        written_by(
            s,
            "kubectl-edit",
            "Update",
            json!({"f:data": {"f:token": {}}}),
            "2023-10-09T22:00:00Z",
        );
    });
    sim.send("update", &edited);
    check(sim.notified(), &["firing manual_edit Secret/dingtalk"]);
    // Every transition as the store writes it (the outbox payload) and as channels send it.
    let everything: String = sim
        .log
        .iter()
        .map(|transition| {
            let notice = drift_model::Notice {
                kind: drift_model::NoticeKind::Firing,
                drift: transition.drift.clone(),
                at: transition.at,
                resend: 0,
                remediation: None,
            };
            let stored = drift_store::rows::encode_notice(&notice).unwrap();
            let sent =
                serde_json::to_string(&drift_model::wire::notice::NoticeJson::new(&notice, None))
                    .unwrap();
            stored + &sent
        })
        .collect();
    assert!(everything.contains("/data/token"));
    assert!(
        !everything.contains("Q0FOQVJZ"),
        "no Secret value in any transition"
    );
}

#[test]
fn disabling_a_class_by_hot_reload_resolves_its_open_drifts() {
    let mut sim = Sim::new();
    let stuck = changed(&service(), |s| s["metadata"]["generation"] = json!(2));
    sim.send("update", &stuck);
    sim.wait(301);
    sim.reload("classes:\n  generation_lag:\n    enabled: false\n");
    check(
        sim.notified(),
        &[
            "firing generation_lag Service/knative-webapp",
            "resolved generation_lag Service/knative-webapp",
        ],
    );
    assert_eq!(
        sim.last("generation_lag").drift.resolution.as_deref(),
        Some("class disabled in the rules")
    );
}

#[test]
fn reverting_a_long_value_resolves_and_the_hint_restores_it_whole() {
    let mut sim = Sim::new();
    let shipped = config_autoscaler();
    let original = shipped["data"]["_example"].as_str().unwrap().to_string();
    assert!(original.len() > 1000, "the fixture's _example is long");
    sim.send("add", &shipped);
    let edited = changed(&shipped, |c| {
        c["data"]["_example"] = json!(original.replace("min-scale: \"0\"", "min-scale: \"3\""));
        written_by(
            c,
            "kubectl-edit",
            "Update",
            json!({"f:data": {"f:_example": {}}}),
            "2023-10-09T22:00:00Z",
        );
    });
    sim.send("update", &edited);
    let hint = sim
        .last("config_drift")
        .drift
        .evidence
        .hint
        .clone()
        .unwrap();
    let patch = hint
        .split(" -p '")
        .nth(1)
        .unwrap()
        .split("'  #")
        .next()
        .unwrap();
    let operations: serde_json::Value = serde_json::from_str(&patch.replace("'\\''", "'")).unwrap();
    assert_eq!(
        operations[0]["value"],
        json!(original),
        "the patch restores the whole value"
    );
    sim.send(
        "update",
        &changed(&edited, |c| c["data"]["_example"] = json!(original.clone())),
    );
    check(
        sim.notified(),
        &[
            "firing config_drift ConfigMap/config-autoscaler",
            "resolved config_drift ConfigMap/config-autoscaler",
        ],
    );
}

#[test]
fn gradual_rollout_holding_ready_unknown_is_not_not_ready() {
    let mut sim = Sim::new();
    let rolling = changed(&route(), |r| {
        r["status"]["conditions"] = json!([
            {"type": "AllTrafficAssigned", "status": "True"},
            {"type": "IngressReady", "status": "Unknown", "reason": "RolloutInProgress", "message": "A gradual rollout of the latest revision(s) is in progress."},
            {"type": "Ready", "status": "Unknown", "reason": "RolloutInProgress", "message": "A gradual rollout of the latest revision(s) is in progress."}
        ]);
    });
    sim.send("update", &rolling);
    sim.wait(1800);
    check(sim.notified(), &[]);
}

#[test]
fn a_failed_revision_that_no_longer_gets_traffic_stops_alerting() {
    let mut sim = Sim::new();
    let failed = crate::support::fixture_yaml(
        "serving/redhat-developer-vscode-knative__test-servingTree-singleServiceFailedRevisionRevisionList.yaml",
    )["items"][0]
        .clone();
    sim.send("add", &failed);
    sim.wait(181);
    let parked = changed(&failed, |r| {
        r["metadata"]["labels"]["serving.knative.dev/routingState"] = json!("reserve");
    });
    sim.send("update", &parked);
    check(
        sim.notified(),
        &[
            "firing not_ready Revision/example-2fvz4",
            "resolved not_ready Revision/example-2fvz4",
        ],
    );
}

#[test]
fn a_deleted_service_stops_firing_when_its_tombstone_is_forgotten() {
    let mut sim = Sim::new();
    let service = service();
    sim.send("add", &service);
    sim.send("delete", &changed(&service, |_| {}));
    sim.wait(61);
    sim.wait(7 * 3600);
    check(
        sim.notified(),
        &[
            "firing unexpected_delete Service/knative-webapp",
            "resolved unexpected_delete Service/knative-webapp",
        ],
    );
    assert_eq!(
        sim.last("unexpected_delete").drift.resolution.as_deref(),
        Some("deleted object no longer tracked")
    );
}

#[test]
fn three_episodes_of_one_drift_in_one_round_get_distinct_ids() {
    let mut sim = Sim::new();
    let original = service();
    sim.send("add", &original);
    let edit = |object: &serde_json::Value, percent: i64, manager: &str, time: &str| {
        changed(object, |s| {
            s["spec"]["traffic"][0]["percent"] = json!(percent);
            written_by(
                s,
                manager,
                "Update",
                json!({"f:spec": {"f:traffic": {}}}),
                time,
            );
        })
    };
    // Edit, revert by the controller, edit again: all at the same instant.
    let first = edit(&original, 90, "kubectl-edit", "2023-10-09T22:00:00Z");
    sim.send("update", &first);
    let reverted = edit(&first, 100, "controller", "2023-10-09T22:00:01Z");
    sim.send("update", &reverted);
    let again = edit(&reverted, 80, "kubectl-edit", "2023-10-09T22:00:02Z");
    sim.send("update", &again);
    let ids: std::collections::BTreeSet<String> = sim
        .log
        .iter()
        .filter(|transition| transition.drift.class == "manual_edit" && transition.from.is_none())
        .map(|transition| transition.drift.id.clone())
        .collect();
    assert_eq!(ids.len(), 2, "two episodes, two ids");
}

/// A reload during a baseline drift's grace (any reload: a GitOps sync may reload every few
/// minutes) re-judges it without an event, which cannot say who made the change: the drift
/// fires with the actor its event gave it.
#[test]
fn a_reload_keeps_the_baseline_drifts_actor() {
    let mut sim = Sim::with_compiled(baseline_rules());
    let service = service();
    sim.send("add", &service);
    sim.wait(600);
    sim.send("update", &deployed_by_helm(&service, "v9"));
    sim.wait(60);
    sim.reload_compiled(baseline_rules());
    sim.wait(301);
    let fired = sim.last("baseline_drift");
    assert_eq!(fired.drift.state.as_str(), "firing");
    assert_eq!(
        fired
            .drift
            .evidence
            .actor
            .as_ref()
            .map(|a| a.manager.as_str()),
        Some("helm-controller"),
        "{:?}",
        fired.drift.evidence
    );
}

/// A restart re-judges the open baseline drift from the kept object: it keeps its actor.
#[test]
fn a_restart_keeps_the_baseline_drifts_actor() {
    let (mut sim, _) = baseline_drift_firing();
    sim.restart();
    sim.wait(1);
    let drift = sim
        .engine()
        .open_drifts()
        .find(|drift| drift.class == "baseline_drift")
        .expect("still open")
        .clone();
    assert_eq!(
        drift.evidence.actor.as_ref().map(|a| a.manager.as_str()),
        Some("helm-controller"),
        "{:?}",
        drift.evidence
    );
}
