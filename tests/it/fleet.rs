//! Fleet drift in the engine (`fleet.groups`, class `fleet_divergence`): two or three clusters'
//! copies of Knative's own ConfigMaps (the shipped `config-autoscaler` and `config-network`,
//! `app.kubernetes.io/version` label included) sent as events of each cluster. A difference
//! fires after the group's grace naming every cluster and value, and resolves when aligned; a
//! rollout that reaches every member within grace stays silent; an object a member never
//! reported is not missing, a deleted one is (past its tombstone's expiry too); a version skew;
//! a reload that removes or narrows a group or drops the only holder; a decommissioned member;
//! clusters and controller-made objects outside every comparison.

use serde_json::{json, Value};

use crate::scenario::*;
use crate::support::fixture_yaml;

const FLEET: &str = r#"
groups:
  - name: prod
    clusters: ["prod-*"]
    compare:
      - {apiVersion: v1, kind: ConfigMap, namespace: knative-serving, name: "config-*"}
    ignorePaths: [/data/logging.enable-probe-request-log]
    severity: critical
    grace: 5m
"#;

/// Only the fleet class's lines (the ConfigMap edits are `config_drift` too).
fn fleet_only(lines: Vec<String>) -> Vec<String> {
    lines
        .into_iter()
        .filter(|line| line.contains("fleet_divergence"))
        .collect()
}

/// A shipped Knative ConfigMap as `cluster` holds it: its own uid there (a uid names one
/// object in one cluster), a resourceVersion from the scenario's counter.
fn in_cluster(file: &str, cluster: &str) -> Value {
    let mut object = fixture_yaml(&format!("configmaps/{file}"));
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    object["metadata"]["uid"] = json!(format!("{cluster}-{name}-uid"));
    changed(&object, |_| {})
}

fn autoscaler(cluster: &str) -> Value {
    in_cluster(
        "knative-serving__config-core-configmaps__config-autoscaler.yaml",
        cluster,
    )
}

fn network(cluster: &str) -> Value {
    in_cluster(
        "knative-serving__vendor-knative-networking__config-network.yaml",
        cluster,
    )
}

/// A copy with one data key set (one of the keys documented in `_example`).
fn with_key(object: &Value, key: &str, value: &str) -> Value {
    changed(object, |o| o["data"][key] = json!(value))
}

fn open_fleet(sim: &Sim) -> Vec<String> {
    fleet_only(sim.open())
}

#[test]
fn one_key_different_fires_after_grace_naming_both_clusters_and_values_and_resolves_when_aligned() {
    let mut sim = Sim::with_fleet("{}", FLEET);
    let eu = with_key(
        &autoscaler("prod-eu"),
        "container-concurrency-target-default",
        "100",
    );
    let us = with_key(
        &autoscaler("prod-us"),
        "container-concurrency-target-default",
        "100",
    );
    sim.send_to("prod-eu", "add", &eu);
    sim.send_to("prod-us", "add", &us);
    assert_eq!(open_fleet(&sim), Vec::<String>::new());
    let us_edited = with_key(&us, "container-concurrency-target-default", "50");
    sim.send_to("prod-us", "update", &us_edited);
    check(
        fleet_only(sim.lines()),
        &["pending fleet_divergence/prod ConfigMap/config-autoscaler"],
    );
    sim.wait(299);
    assert_eq!(fleet_only(sim.notified()), Vec::<String>::new());
    sim.wait(1);
    check(
        fleet_only(sim.notified()),
        &["firing fleet_divergence/prod ConfigMap/config-autoscaler"],
    );
    let drift = sim.last("fleet_divergence").drift.clone();
    assert_eq!(drift.cluster, "fleet:prod");
    assert_eq!(drift.uid, "ConfigMap/knative-serving/config-autoscaler");
    assert_eq!(
        (drift.api_version.as_str(), drift.namespace.as_str()),
        ("v1", "knative-serving")
    );
    assert_eq!(drift.severity.as_str(), "critical");
    assert_eq!(
        drift.evidence.summary,
        "ConfigMap/knative-serving/config-autoscaler differs across fleet group prod: \
         /data/container-concurrency-target-default is \"100\" in prod-eu; \"50\" in prod-us"
    );
    let values: Value = serde_json::from_str(&drift.evidence.facts["values"]).unwrap();
    assert_eq!(
        values,
        json!([{"path": "/data/container-concurrency-target-default",
                "values": {"prod-eu": "100", "prod-us": "50"}}])
    );
    assert_eq!(drift.evidence.facts["members"], "prod-eu,prod-us");
    let hint = drift.evidence.hint.unwrap();
    assert!(hint.contains("kubectl --context "), "{hint}");
    assert!(
        hint.contains("patch configmap config-autoscaler --type merge"),
        "{hint}"
    );
    // Aligned: prod-us takes prod-eu's value.
    sim.send_to(
        "prod-us",
        "update",
        &with_key(&us_edited, "container-concurrency-target-default", "100"),
    );
    check(
        fleet_only(sim.notified()),
        &[
            "firing fleet_divergence/prod ConfigMap/config-autoscaler",
            "resolved fleet_divergence/prod ConfigMap/config-autoscaler",
        ],
    );
    assert_eq!(
        sim.last("fleet_divergence").drift.resolution.as_deref(),
        Some("every member holds the same desired state")
    );
}

#[test]
fn a_rollout_reaching_every_member_within_grace_stays_silent() {
    let mut sim = Sim::with_fleet("{}", FLEET);
    let eu = autoscaler("prod-eu");
    let us = autoscaler("prod-us");
    sim.send_to("prod-eu", "add", &eu);
    sim.send_to("prod-us", "add", &us);
    sim.send_to(
        "prod-eu",
        "update",
        &with_key(&eu, "enable-scale-to-zero", "false"),
    );
    sim.wait(240);
    sim.send_to(
        "prod-us",
        "update",
        &with_key(&us, "enable-scale-to-zero", "false"),
    );
    sim.wait(3600);
    check(
        fleet_only(sim.lines()),
        &[
            "pending fleet_divergence/prod ConfigMap/config-autoscaler",
            "resolved fleet_divergence/prod ConfigMap/config-autoscaler",
        ],
    );
    assert_eq!(fleet_only(sim.notified()), Vec::<String>::new());
}

#[test]
fn status_churn_and_example_edits_are_not_divergence() {
    let mut sim = Sim::with_fleet("{}", FLEET);
    let eu = autoscaler("prod-eu");
    let us = autoscaler("prod-us");
    sim.send_to("prod-eu", "add", &eu);
    sim.send_to("prod-us", "add", &us);
    // `_example` is documentation; the ignored path is left out by the group.
    let us = changed(&us, |o| {
        o["data"]["_example"] = json!("# edited by hand");
        o["data"]["logging.enable-probe-request-log"] = json!("true");
    });
    sim.send_to("prod-us", "update", &us);
    // Bookkeeping annotations differ per cluster by nature.
    sim.send_to(
        "prod-eu",
        "update",
        &changed(&eu, |o| {
            o["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
                json!("{}")
        }),
    );
    sim.wait(3600);
    assert_eq!(
        fleet_only(sim.lines()),
        Vec::<String>::new(),
        "{:?}",
        sim.log.last().map(|t| &t.drift.evidence.summary)
    );
}

#[test]
fn a_knative_version_skew_fires_naming_each_clusters_release() {
    let mut sim = Sim::with_fleet("{}", FLEET);
    let eu = network("prod-eu");
    let us = network("prod-us");
    sim.send_to("prod-eu", "add", &eu);
    sim.send_to("prod-us", "add", &us);
    sim.send_to(
        "prod-eu",
        "update",
        &changed(&eu, |o| {
            o["metadata"]["labels"]["app.kubernetes.io/version"] = json!("1.15.1")
        }),
    );
    sim.wait(300);
    check(
        fleet_only(sim.notified()),
        &["firing fleet_divergence/prod ConfigMap/config-network"],
    );
    let drift = sim.last("fleet_divergence").drift.clone();
    assert!(
        drift.evidence.summary.ends_with(
            "/metadata/labels/app.kubernetes.io~1version is \"1.15.1\" in prod-eu; \"devel\" in prod-us"
        ),
        "{}",
        drift.evidence.summary
    );
}

/// How long the engine keeps a tombstone (`TOMBSTONE_RETENTION_MS`), in seconds.
const TOMBSTONE_RETENTION: i64 = 6 * 3600;

#[test]
fn an_object_a_member_never_reported_is_not_missing_from_it() {
    // The reviewer's input: each cluster sends an update of a different ConfigMap (the first
    // the service hears of either). Neither is known to be missing anywhere.
    let mut sim = Sim::with_fleet("{}", FLEET);
    sim.send_to("prod-eu", "update", &autoscaler("prod-eu"));
    sim.send_to("prod-us", "update", &network("prod-us"));
    sim.wait(3600);
    assert_eq!(fleet_only(sim.lines()), Vec::<String>::new());
    // The fleet view says so: the other member's cell is not reported, nothing differs.
    let view = sim.engine().fleet_view(None);
    let objects: Vec<(String, Vec<String>, bool)> = view[0]
        .objects
        .iter()
        .map(|object| {
            (
                object.object.key(),
                object.not_reported.clone(),
                object.divergent(),
            )
        })
        .collect();
    assert_eq!(
        objects,
        [
            (
                "ConfigMap/knative-serving/config-autoscaler".to_string(),
                vec!["prod-us".to_string()],
                false
            ),
            (
                "ConfigMap/knative-serving/config-network".to_string(),
                vec!["prod-eu".to_string()],
                false
            ),
        ]
    );
    assert!(view[0].objects[0]
        .rows
        .iter()
        .all(|row| !row.values[1].reported && !row.values[1].highlighted));
}

#[test]
fn a_delete_in_one_member_fires_keeps_firing_past_tombstone_expiry_and_resolves_when_recreated() {
    let mut sim = Sim::with_fleet("{}", FLEET);
    sim.send_to("prod-eu", "add", &autoscaler("prod-eu"));
    sim.send_to("prod-eu", "add", &network("prod-eu"));
    sim.send_to("prod-us", "add", &autoscaler("prod-us"));
    sim.send_to("prod-us", "add", &network("prod-us"));
    assert_eq!(open_fleet(&sim), Vec::<String>::new());
    sim.send_to("prod-us", "delete", &network("prod-us"));
    assert_eq!(
        open_fleet(&sim),
        ["fleet_divergence/prod pending ConfigMap/config-network"]
    );
    sim.wait(300);
    check(
        fleet_only(sim.notified()),
        &["firing fleet_divergence/prod ConfigMap/config-network"],
    );
    let drift = sim.last("fleet_divergence").drift.clone();
    assert_eq!(
        drift.evidence.summary,
        "ConfigMap/knative-serving/config-network is missing from prod-us in fleet group prod"
    );
    assert_eq!(
        drift.evidence.hint.as_deref(),
        Some(
            "ConfigMap/knative-serving/config-network is in prod-eu but not in prod-us: add it to prod-us or delete it from prod-eu\n\
             add it to prod-us from Git, or copy it from prod-eu: kubectl --context prod-eu -n knative-serving get configmap config-network -o json | jq 'del(.metadata.uid,.metadata.resourceVersion,.metadata.creationTimestamp,.metadata.generation,.metadata.managedFields,.metadata.ownerReferences,.status)' | kubectl --context prod-us apply -f -\n\
             or delete it from prod-eu: kubectl --context prod-eu -n knative-serving delete configmap config-network"
        )
    );
    // The tombstone expires; the deletion is still the evidence (the drift names prod-us), and
    // a change in prod-eu does not turn prod-us into "not reported".
    sim.wait(TOMBSTONE_RETENTION + 60);
    sim.send_to(
        "prod-eu",
        "update",
        &with_key(&network("prod-eu"), "ingress-class", "kourier"),
    );
    sim.wait(60);
    assert_eq!(
        open_fleet(&sim),
        ["fleet_divergence/prod firing ConfigMap/config-network"]
    );
    assert_eq!(
        sim.engine()
            .open_drifts()
            .find(|drift| drift.class == "fleet_divergence")
            .unwrap()
            .evidence
            .summary,
        "ConfigMap/knative-serving/config-network is missing from prod-us in fleet group prod"
    );
    // prod-us creates it again (a new uid), as prod-eu holds it: resolved.
    sim.send_to(
        "prod-us",
        "add",
        &with_key(&network("prod-us-2"), "ingress-class", "kourier"),
    );
    check(
        fleet_only(sim.notified()),
        &[
            "firing fleet_divergence/prod ConfigMap/config-network",
            "resolved fleet_divergence/prod ConfigMap/config-network",
        ],
    );
}

#[test]
fn a_decommissioned_member_stops_counting_once_its_tombstones_expire() {
    let mut sim = Sim::with_fleet("{}", FLEET);
    sim.send_to("prod-eu", "add", &autoscaler("prod-eu"));
    sim.send_to("prod-us", "add", &autoscaler("prod-us"));
    // prod-us is torn down: its only object is deleted.
    sim.send_to("prod-us", "delete", &autoscaler("prod-us"));
    sim.wait(300);
    check(
        fleet_only(sim.notified()),
        &["firing fleet_divergence/prod ConfigMap/config-autoscaler"],
    );
    // Its tombstone expires without any event: prod-us holds nothing, it is no member, and the
    // drift is judged again over the members left.
    sim.wait(TOMBSTONE_RETENTION + 60);
    check(
        fleet_only(sim.notified()),
        &[
            "firing fleet_divergence/prod ConfigMap/config-autoscaler",
            "resolved fleet_divergence/prod ConfigMap/config-autoscaler",
        ],
    );
    assert_eq!(
        sim.last("fleet_divergence").drift.resolution.as_deref(),
        Some("fewer than two members report the object")
    );
}

#[test]
fn a_reload_that_drops_the_only_holder_resolves_the_drift() {
    let mut sim = Sim::with_fleet("{}", FLEET);
    sim.send_to("prod-eu", "add", &autoscaler("prod-eu"));
    sim.send_to("prod-us", "add", &autoscaler("prod-us"));
    sim.send_to("prod-us", "add", &network("prod-us"));
    sim.send_to("prod-ap", "add", &network("prod-ap"));
    sim.send_to("prod-us", "delete", &autoscaler("prod-us"));
    sim.wait(300);
    assert_eq!(
        open_fleet(&sim),
        ["fleet_divergence/prod firing ConfigMap/config-autoscaler"]
    );
    // prod-eu, the only member holding config-autoscaler, leaves the group: no event is about
    // the object, and no live copy of it is left to re-assess.
    sim.reload_fleet("{}", &FLEET.replace("[\"prod-*\"]", "[prod-us, prod-ap]"));
    assert_eq!(open_fleet(&sim), Vec::<String>::new());
    assert_eq!(
        sim.last("fleet_divergence").drift.resolution.as_deref(),
        Some("fewer than two members report the object")
    );
}

/// What the Knative Operator installs is desired state: its ConfigMaps, owned by the
/// `KnativeServing`, are compared. What Knative's runtime makes (a Service's Configuration,
/// owned by the Service) holds each cluster's own content and is not.
#[test]
fn operator_installed_objects_are_compared_and_runtime_made_ones_are_not() {
    let owned_by = |object: &Value, cluster: &str, api_version: &str, kind: &str, value: &str| {
        changed(object, |o| {
            o["metadata"]["ownerReferences"] = json!([{
                "apiVersion": api_version, "kind": kind,
                "name": "owner", "uid": format!("{cluster}-owner"), "controller": true}]);
            o["data"]["max-scale"] = json!(value);
        })
    };
    let mut sim = Sim::with_fleet("{}", FLEET);
    let operator = "operator.knative.dev/v1beta1";
    sim.send_to(
        "prod-eu",
        "add",
        &owned_by(
            &autoscaler("prod-eu"),
            "prod-eu",
            operator,
            "KnativeServing",
            "1",
        ),
    );
    sim.send_to(
        "prod-us",
        "add",
        &owned_by(
            &autoscaler("prod-us"),
            "prod-us",
            operator,
            "KnativeServing",
            "2",
        ),
    );
    sim.wait(301);
    assert_eq!(
        fleet_only(sim.notified()),
        ["firing fleet_divergence/prod ConfigMap/config-autoscaler"]
    );
    // The same ConfigMaps, had a Knative Service made them, are each cluster's own.
    let mut sim = Sim::with_fleet("{}", FLEET);
    let runtime = "serving.knative.dev/v1";
    sim.send_to(
        "prod-eu",
        "add",
        &owned_by(&autoscaler("prod-eu"), "prod-eu", runtime, "Service", "1"),
    );
    sim.send_to(
        "prod-us",
        "add",
        &owned_by(&autoscaler("prod-us"), "prod-us", runtime, "Service", "2"),
    );
    sim.wait(3600);
    assert_eq!(fleet_only(sim.lines()), Vec::<String>::new());
}

#[test]
fn clusters_and_objects_outside_every_group_make_no_fleet_drift() {
    let mut sim = Sim::with_fleet("{}", FLEET);
    sim.send_to("prod-eu", "add", &autoscaler("prod-eu"));
    // Not a member: any value.
    sim.send_to(
        "staging",
        "add",
        &with_key(&autoscaler("staging"), "max-scale", "3"),
    );
    // Not compared: another namespace.
    let mut elsewhere = autoscaler("prod-us");
    elsewhere["metadata"]["namespace"] = json!("default");
    sim.send_to("prod-eu", "add", &with_key(&elsewhere, "max-scale", "3"));
    sim.wait(3600);
    assert_eq!(fleet_only(sim.lines()), Vec::<String>::new());
}

#[test]
fn a_reload_that_removes_or_narrows_a_group_resolves_its_drifts() {
    let mut sim = Sim::with_fleet("{}", FLEET);
    let eu = autoscaler("prod-eu");
    sim.send_to("prod-eu", "add", &eu);
    sim.send_to(
        "prod-us",
        "add",
        &with_key(&autoscaler("prod-us"), "max-scale", "3"),
    );
    sim.wait(300);
    check(
        fleet_only(sim.notified()),
        &["firing fleet_divergence/prod ConfigMap/config-autoscaler"],
    );
    // Narrowed to one member: nothing to compare it with.
    sim.reload_fleet("{}", &FLEET.replace("[\"prod-*\"]", "[prod-eu]"));
    check(
        fleet_only(sim.notified()),
        &[
            "firing fleet_divergence/prod ConfigMap/config-autoscaler",
            "resolved fleet_divergence/prod ConfigMap/config-autoscaler",
        ],
    );
    // Widened again: the difference is found again.
    sim.reload_fleet("{}", FLEET);
    sim.wait(300);
    assert_eq!(
        open_fleet(&sim),
        ["fleet_divergence/prod firing ConfigMap/config-autoscaler"]
    );
    // Removed: resolved with the reason.
    sim.reload_fleet("{}", "groups: []");
    assert_eq!(open_fleet(&sim), Vec::<String>::new());
    assert_eq!(
        sim.last("fleet_divergence").drift.resolution.as_deref(),
        Some("fleet group removed from the config")
    );
    // The group no longer compares the object.
    sim.reload_fleet("{}", FLEET);
    sim.wait(300);
    assert_eq!(open_fleet(&sim).len(), 1);
    sim.reload_fleet("{}", &FLEET.replace("config-*", "config-network"));
    assert_eq!(open_fleet(&sim), Vec::<String>::new());
    assert_eq!(
        sim.last("fleet_divergence").drift.resolution.as_deref(),
        Some("the fleet group no longer compares the object")
    );
}

#[test]
fn a_firing_fleet_drift_survives_a_restart_without_a_second_alert() {
    let mut sim = Sim::with_fleet("{}", FLEET);
    sim.send_to("prod-eu", "add", &autoscaler("prod-eu"));
    sim.send_to(
        "prod-us",
        "add",
        &with_key(&autoscaler("prod-us"), "max-scale", "3"),
    );
    sim.wait(300);
    let fired = sim.last("fleet_divergence").drift.clone();
    sim.restart();
    sim.wait(1);
    sim.wait(1);
    assert_eq!(
        open_fleet(&sim),
        ["fleet_divergence/prod firing ConfigMap/config-autoscaler"]
    );
    assert_eq!(
        sim.engine()
            .open_drifts()
            .find(|drift| drift.class == "fleet_divergence")
            .unwrap()
            .id,
        fired.id
    );
    check(
        fleet_only(sim.notified()),
        &["firing fleet_divergence/prod ConfigMap/config-autoscaler"],
    );
}

#[test]
fn an_object_forged_under_a_fleet_drifts_key_cannot_end_it() {
    let mut sim = Sim::with_fleet("{}", FLEET);
    sim.send_to("prod-eu", "add", &autoscaler("prod-eu"));
    sim.send_to(
        "prod-us",
        "add",
        &with_key(&autoscaler("prod-us"), "max-scale", "3"),
    );
    sim.wait(300);
    assert_eq!(
        open_fleet(&sim),
        ["fleet_divergence/prod firing ConfigMap/config-autoscaler"]
    );
    // An event naming cluster `fleet:prod` and the drift's uid, then its delete. Ingest refuses
    // the name (issue 27: `fleet:` is reserved); past that check the engine still holds: not a
    // member (no difference found in it), and the delete's clean-up leaves the group's drift alone.
    let mut forged = autoscaler("forged");
    forged["metadata"]["uid"] = json!("ConfigMap/knative-serving/config-autoscaler");
    let mut event = crate::support::structured_event("forged-1", "add", &forged);
    event["cluster"] = json!("fleet:prod");
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "content-type",
        http::HeaderValue::from_static("application/cloudevents+json"),
    );
    let refused = drift_core::decode::decode_request(
        &headers,
        &serde_json::to_vec(&event).unwrap(),
        &Default::default(),
    )
    .unwrap_err();
    assert!(
        refused.to_string().contains("reserved for fleet drifts"),
        "{refused}"
    );
    sim.send_past_decode("fleet:prod", "add", &forged);
    sim.send_past_decode("fleet:prod", "delete", &changed(&forged, |_| {}));
    sim.wait(3600);
    assert_eq!(
        open_fleet(&sim),
        ["fleet_divergence/prod firing ConfigMap/config-autoscaler"]
    );
    let members = &sim
        .engine()
        .open_drifts()
        .find(|drift| drift.class == "fleet_divergence")
        .unwrap()
        .evidence
        .facts["members"];
    assert_eq!(members, "prod-eu,prod-us");
}

#[test]
fn the_fleet_view_caps_objects_per_group_divergent_first_and_filters_by_group() {
    let mut sim = Sim::with_fleet("{}", FLEET);
    let count = drift_core::classify::fleet::MAX_VIEW_OBJECTS + 5;
    for index in 0..count {
        for cluster in ["prod-eu", "prod-us"] {
            let mut object = autoscaler(cluster);
            object["metadata"]["name"] = json!(format!("config-{index:04}"));
            object["metadata"]["uid"] = json!(format!("{cluster}-{index}"));
            // The last one by key differs: it must still be shown, first.
            if index == count - 1 && cluster == "prod-us" {
                object["data"]["max-scale"] = json!("3");
            }
            sim.send_to(cluster, "add", &object);
        }
    }
    let view = sim.engine().fleet_view(Some("prod"));
    assert_eq!(view.len(), 1);
    let group = &view[0];
    assert_eq!(
        group.objects.len(),
        drift_core::classify::fleet::MAX_VIEW_OBJECTS
    );
    assert_eq!(group.truncated, 5);
    assert_eq!(group.divergent, 1);
    assert_eq!(
        group.objects[0].object.name,
        format!("config-{:04}", count - 1)
    );
    assert!(group.objects[0].divergent() && !group.objects[1].divergent());
    assert!(sim.engine().fleet_view(Some("other")).is_empty());
}
