//! All of Knative: the condition classes on every Knative kind, Eventing's delivery path, the
//! operator, metadata edits. Scenarios built from the real Eventing and operator objects in
//! `tests/fixtures/knative` (the vscode-knative, intellij-knative and Argo CD captures), moved
//! through the states their controllers write (condition types, reasons and messages as the
//! Knative reconcilers set them).

use serde_json::{json, Value};

use crate::scenario::*;
use crate::support::fixture_yaml;

fn item(file: &str, pick: impl Fn(&Value) -> bool) -> Value {
    let list = if file.ends_with(".json") {
        let text = std::fs::read_to_string(crate::support::fixture_path(file)).unwrap();
        serde_json::from_str::<Value>(&text).unwrap()
    } else {
        fixture_yaml(file)
    };
    let found = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| pick(item))
        .cloned()
        .expect("fixture item");
    // resourceVersions from the scenario's counter, so one cluster's versions stay plausible.
    changed(&found, |_| {})
}

fn named(name: &'static str) -> impl Fn(&Value) -> bool {
    move |item| item["metadata"]["name"] == name
}

/// A ready Trigger (`josh/example-trigger0`, Broker `example-broker0`, subscriber Knative
/// Service `aaa`), managers `kn` and `mtchannel-broker`.
fn trigger() -> Value {
    item(
        "eventing/redhat-developer-vscode-knative__test-eventingTree-trigger.json",
        named("example-trigger0"),
    )
}

/// The ready Broker `josh/example-broker0`.
fn broker() -> Value {
    item(
        "eventing/redhat-developer-vscode-knative__test-eventingTree-broker__BrokerList.json",
        named("example-broker0"),
    )
}

/// What eventing's trigger reconciler writes when the subscriber cannot be resolved
/// (`MarkSubscriberResolvedFailed("Unable to get the Subscriber's URI", "%v", err)`; the living
/// condition set copies it into Ready).
fn subscriber_lost(trigger: &Value) -> Value {
    changed(trigger, |t| {
        let message =
            r#"failed to get object josh/aaa: services.serving.knative.dev "aaa" not found"#;
        set_condition(
            t,
            "SubscriberResolved",
            "False",
            "Unable to get the Subscriber's URI",
            message,
        );
        set_condition(
            t,
            "Ready",
            "False",
            "Unable to get the Subscriber's URI",
            message,
        );
        t["status"].as_object_mut().unwrap().remove("subscriberUri");
    })
}

// ---- Eventing's delivery path -------------------------------------------------------------

#[test]
fn a_trigger_losing_its_subscriber_is_event_delivery_broken_not_also_not_ready() {
    let mut sim = Sim::new();
    let ready = trigger();
    sim.send("add", &ready);
    let lost = subscriber_lost(&ready);
    sim.send("update", &lost);
    sim.wait(119);
    check(sim.notified(), &[]);
    sim.wait(200);
    check(
        sim.notified(),
        &["firing event_delivery_broken Trigger/example-trigger0"],
    );
    let fired = sim.last("event_delivery_broken").drift.clone();
    assert_eq!(fired.severity.as_str(), "critical");
    let summary = &fired.evidence.summary;
    assert!(
        summary.starts_with(
            "Trigger/josh/example-trigger0 cannot deliver events: SubscriberResolved=False (Unable to get the Subscriber's URI): failed to get object josh/aaa"
        ),
        "{summary}"
    );
    assert!(
        summary.ends_with("; subscriber Service josh/aaa"),
        "{summary}"
    );
    let hint = fired.evidence.hint.clone().unwrap();
    assert!(
        hint.starts_with("kubectl -n josh get services.serving.knative.dev aaa"),
        "{hint}"
    );
    // The subscriber is back (the Service re-created under its old name).
    sim.send(
        "update",
        &changed(&lost, |t| {
            t["status"] = ready["status"].clone();
        }),
    );
    check(
        sim.notified(),
        &[
            "firing event_delivery_broken Trigger/example-trigger0",
            "resolved event_delivery_broken Trigger/example-trigger0",
        ],
    );
}

#[test]
fn with_event_delivery_broken_disabled_the_trigger_is_not_ready() {
    let mut sim = Sim::with_rules("classes: {event_delivery_broken: {enabled: false}}");
    let ready = trigger();
    sim.send("add", &ready);
    sim.send("update", &subscriber_lost(&ready));
    sim.wait(181);
    check(
        sim.notified(),
        &["firing not_ready Trigger/example-trigger0"],
    );
    let fired = &sim.last("not_ready").drift;
    assert_eq!(fired.evidence.facts["condition"], "SubscriberResolved");
    assert_eq!(fired.severity.as_str(), "critical");
}

#[test]
fn a_trigger_whose_broker_is_not_ready_is_reported_on_the_broker_only() {
    let mut sim = Sim::new();
    let ready_broker = broker();
    let ready_trigger = changed(&trigger(), |t| {
        t["metadata"]["uid"] = json!("7bd1c0a6-3c55-4d7e-9e8b-0f0c5a7e0b01");
    });
    sim.send("add", &ready_broker);
    sim.send("add", &ready_trigger);
    let message = "channel \"example-broker0-kne-trigger\" not ready";
    let broken_broker = changed(&ready_broker, |b| {
        set_condition(
            b,
            "TriggerChannelReady",
            "False",
            "ChannelNotReady",
            message,
        );
        set_condition(b, "Ready", "False", "ChannelNotReady", message);
    });
    sim.send("update", &broken_broker);
    let broken_trigger = changed(&ready_trigger, |t| {
        set_condition(t, "BrokerReady", "False", "ChannelNotReady", message);
        set_condition(t, "Ready", "False", "ChannelNotReady", message);
    });
    sim.send("update", &broken_trigger);
    sim.wait(3600);
    check(sim.notified(), &["firing not_ready Broker/example-broker0"]);
    let fired = &sim.last("not_ready").drift;
    assert_eq!(fired.severity.as_str(), "critical");
    assert!(
        fired.evidence.summary.contains(
            "Broker/josh/example-broker0 is not ready: TriggerChannelReady=False (ChannelNotReady)"
        ),
        "{}",
        fired.evidence.summary
    );
}

#[test]
fn a_trigger_whose_broker_is_gone_is_event_delivery_broken() {
    let mut sim = Sim::new();
    let ready = trigger();
    sim.send("add", &ready);
    let orphaned = changed(&ready, |t| {
        let message = r#"Broker "example-broker0" does not exist"#;
        set_condition(t, "BrokerReady", "False", "BrokerDoesNotExist", message);
        set_condition(t, "Ready", "False", "BrokerDoesNotExist", message);
    });
    sim.send("update", &orphaned);
    sim.wait(121);
    check(
        sim.notified(),
        &["firing event_delivery_broken Trigger/example-trigger0"],
    );
    assert_summary(
        &sim,
        "event_delivery_broken",
        "BrokerReady=False (BrokerDoesNotExist)",
        "; Broker josh/example-broker0",
    );
}

#[test]
fn a_source_without_its_sink_is_event_delivery_broken() {
    let mut sim = Sim::new();
    // A real ApiServerSource whose sink Service does not exist: SinkProvided=False NotFound.
    let source = item(
        "eventing/redhat-developer-intellij-knative__src-test-resources-kn-sourcesList__ApiServerSource-SinkNotFound.yaml",
        named("example-source-apiserver0"),
    );
    sim.send("add", &source);
    sim.wait(121);
    check(
        sim.notified(),
        &["firing event_delivery_broken ApiServerSource/example-source-apiserver0"],
    );
    assert_summary(
        &sim,
        "event_delivery_broken",
        "SinkProvided=False (NotFound)",
        "; sink Service default/aaa",
    );
}

#[test]
fn a_ping_source_whose_adapter_is_unavailable_is_a_critical_not_ready() {
    let mut sim = Sim::new();
    let list = fixture_yaml(
        "eventing/redhat-developer-vscode-knative__test-eventingTree-sourceList__SourceList-PingSource-MinimumReplicasUnavailable.yaml",
    );
    let ping = changed(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|item| item["kind"] == "PingSource")
            .unwrap(),
        |_| {},
    );
    let name = ping["metadata"]["name"].as_str().unwrap().to_string();
    sim.send("add", &ping);
    sim.wait(181);
    check(
        sim.notified(),
        &[format!("firing not_ready PingSource/{name}").as_str()],
    );
    let fired = &sim.last("not_ready").drift;
    assert_eq!(fired.severity.as_str(), "critical");
    assert!(fired
        .evidence
        .summary
        .contains("Deployed=False (MinimumReplicasUnavailable): Deployment does not have minimum availability."));
}

#[test]
fn a_subscription_whose_channel_is_missing_names_the_channel() {
    let mut sim = Sim::new();
    let subscription = item(
        "eventing/redhat-developer-vscode-knative__test-eventingTree-subscriptionList__SubscriptionList-ChannelReferenceFailed.yaml",
        named("example-subscription3"),
    );
    sim.send("add", &subscription);
    sim.wait(121);
    check(
        sim.notified(),
        &["firing event_delivery_broken Subscription/example-subscription3"],
    );
    assert_summary(&sim, "event_delivery_broken", "ReferencesResolved=Unknown (ChannelReferenceFailed): Failed to get Spec.Channel or backing channel", "; channel Channel josh/example-channel2");
}

#[test]
fn a_broker_starting_up_is_benign() {
    let mut sim = Sim::new();
    let ready = broker();
    // What the Broker controller writes first: every condition Unknown, nothing observed yet.
    let starting = changed(&ready, |b| {
        for condition in b["status"]["conditions"].as_array_mut().unwrap() {
            condition["status"] = json!("Unknown");
        }
        b["status"]
            .as_object_mut()
            .unwrap()
            .remove("observedGeneration");
        b["status"].as_object_mut().unwrap().remove("address");
    });
    sim.send("add", &starting);
    sim.wait(4);
    sim.send("update", &changed(&ready, |_| {}));
    sim.wait(3600);
    check(sim.notified(), &[]);
}

#[test]
fn a_trigger_filter_edited_by_hand_is_a_manual_edit() {
    let mut sim = Sim::new();
    let ready = trigger();
    sim.send("add", &ready);
    let edited = changed(&ready, |t| {
        t["spec"]["filter"]["attributes"]["type"] = json!("dev.knative.bar");
        written_by(
            t,
            "kubectl-edit",
            "Update",
            json!({"f:spec": {"f:filter": {"f:attributes": {"f:type": {}}}}}),
            "2021-01-15T09:00:00Z",
        );
    });
    sim.send("update", &edited);
    check(
        sim.notified(),
        &["firing manual_edit Trigger/example-trigger0"],
    );
    let fired = &sim.last("manual_edit").drift;
    assert_eq!(
        fired.evidence.actor.as_ref().unwrap().manager,
        "kubectl-edit"
    );
    assert!(fired
        .evidence
        .changes
        .iter()
        .any(|change| change.path == "/spec/filter/attributes/type"
            && change.before == Some(json!("dev.knative.foo"))));
    assert!(fired
        .evidence
        .hint
        .as_deref()
        .unwrap()
        .starts_with("kubectl -n josh patch triggers.eventing.knative.dev example-trigger0"));
}

// ---- metadata edits ----------------------------------------------------------------------------

#[test]
fn a_visibility_label_flipped_by_hand_is_a_warning_and_bookkeeping_is_not_an_edit() {
    let mut sim = Sim::new();
    let original = service();
    sim.send("add", &original);
    // Knative's webhook stamps lastModifier on every write: bookkeeping, never an edit.
    let stamped = changed(&original, |s| {
        s["metadata"]["annotations"]["serving.knative.dev/lastModifier"] =
            json!("jane@example.com");
        written_by(
            s,
            "kubectl-annotate",
            "Update",
            json!({"f:metadata": {"f:annotations": {"f:serving.knative.dev/lastModifier": {}}}}),
            "2023-10-09T21:44:00Z",
        );
    });
    sim.send("update", &stamped);
    check(sim.notified(), &[]);
    let private = changed(&stamped, |s| {
        s["metadata"]["labels"] = json!({"networking.knative.dev/visibility": "cluster-local"});
        written_by(
            s,
            "kubectl-label",
            "Update",
            json!({"f:metadata": {"f:labels": {"f:networking.knative.dev/visibility": {}}}}),
            "2023-10-09T21:45:00Z",
        );
    });
    sim.send("update", &private);
    check(
        sim.notified(),
        &["firing manual_edit Service/knative-webapp"],
    );
    let fired = sim.last("manual_edit").drift.clone();
    assert_eq!(fired.severity.as_str(), "warning");
    assert_eq!(
        fired.evidence.actor.as_ref().unwrap().manager,
        "kubectl-label"
    );
    let change = &fired.evidence.changes[0];
    assert_eq!(
        change.path,
        "/metadata/labels/networking.knative.dev~1visibility"
    );
    assert_eq!(change.before, None);
    assert_eq!(change.after, Some(json!("cluster-local")));
    // Removing the label again restores what was there: resolved.
    let public_again = changed(&private, |s| {
        s["metadata"].as_object_mut().unwrap().remove("labels");
    });
    sim.send("update", &public_again);
    check(
        sim.notified(),
        &[
            "firing manual_edit Service/knative-webapp",
            "resolved manual_edit Service/knative-webapp",
        ],
    );
}

#[test]
fn an_ordinary_label_added_by_hand_is_info() {
    let mut sim = Sim::new();
    let original = service();
    sim.send("add", &original);
    let labelled = changed(&original, |s| {
        s["metadata"]["labels"] = json!({"team": "payments"});
        written_by(
            s,
            "kubectl-label",
            "Update",
            json!({"f:metadata": {"f:labels": {"f:team": {}}}}),
            "2023-10-09T21:45:00Z",
        );
    });
    sim.send("update", &labelled);
    assert_eq!(sim.last("manual_edit").drift.severity.as_str(), "info");
}

#[test]
fn configured_metadata_keys_replace_the_defaults() {
    let mut sim = Sim::with_rules("metadataKeys: {bookkeeping: [team], behavioural: []}");
    let original = service();
    sim.send("add", &original);
    let labelled = changed(&original, |s| {
        s["metadata"]["labels"] =
            json!({"team": "payments", "networking.knative.dev/visibility": "cluster-local"});
        written_by(
            s,
            "kubectl-label",
            "Update",
            json!({"f:metadata": {"f:labels": {"f:team": {}, "f:networking.knative.dev/visibility": {}}}}),
            "2023-10-09T21:45:00Z",
        );
    });
    sim.send("update", &labelled);
    let fired = &sim.last("manual_edit").drift;
    // `team` is bookkeeping now; visibility is no longer behavioural, so info.
    assert_eq!(fired.evidence.changes.len(), 1);
    assert_eq!(fired.severity.as_str(), "info");
}

// ---- the operator --------------------------------------------------------------------------

fn knative_serving() -> Value {
    let fixture = fixture_yaml(
        "serving-internal/argoproj-argo-cd__resource_customizations-operator.knative.dev-KnativeServing-testdata-healthy__KnativeServing.yaml",
    );
    changed(&fixture, |_| {})
}

#[test]
fn an_operator_cr_without_observed_generation_is_no_generation_lag() {
    let mut sim = Sim::new();
    // The v1alpha1 operator never wrote status.observedGeneration (generation is 2 here).
    sim.send("add", &knative_serving());
    sim.wait(3600);
    check(sim.notified(), &[]);
}

#[test]
fn an_operator_upgrade_that_completes_is_benign_and_one_that_hangs_is_stuck() {
    let mut sim = Sim::new();
    let installed = knative_serving();
    sim.send("add", &installed);
    let upgrading = changed(&installed, |k| {
        k["spec"]["version"] = json!("0.15");
        set_condition(
            k,
            "DeploymentsAvailable",
            "False",
            "NotReady",
            "Waiting on deployments: controller, webhook",
        );
        set_condition(
            k,
            "Ready",
            "False",
            "NotReady",
            "Waiting on deployments: controller, webhook",
        );
    });
    sim.send("update", &upgrading);
    sim.wait(600);
    let upgraded = changed(&upgrading, |k| {
        k["status"]["version"] = json!("0.15.1");
        set_condition(k, "DeploymentsAvailable", "True", "", "");
        set_condition(k, "Ready", "True", "", "");
    });
    sim.send("update", &upgraded);
    sim.wait(3600);
    check(sim.notified(), &[]);

    let stuck = changed(&upgraded, |k| {
        k["spec"]["version"] = json!("0.16");
        set_condition(
            k,
            "InstallSucceeded",
            "False",
            "Error",
            "Install failed with message: webhook not ready",
        );
        set_condition(
            k,
            "Ready",
            "False",
            "Error",
            "Install failed with message: webhook not ready",
        );
    });
    sim.send("update", &stuck);
    sim.wait(899);
    check(sim.notified(), &[]);
    sim.wait(2);
    check(
        sim.notified(),
        &["firing operator_upgrade_stuck KnativeServing/knative-serving"],
    );
    let summary = &sim.last("operator_upgrade_stuck").drift.evidence.summary;
    assert!(
        summary.contains("is stuck upgrading from 0.15.1 to 0.16: InstallSucceeded=False (Error)"),
        "{summary}"
    );
}

// ---- drift-sentinel's own event path ------------------------------------------------------

/// Rules naming the fixture Trigger's namespace, Broker and subscriber as the own event path.
const OWN_PATH: &str = "ownPipeline: {namespace: josh, apiServerSource: example-source-apiserver0, broker: example-broker0, trigger: example-trigger0, service: aaa}";

/// The real ApiServerSource, moved into the own path's namespace, sending to the Broker in
/// Resource mode, ready.
fn own_source() -> Value {
    let source = item(
        "eventing/redhat-developer-intellij-knative__src-test-resources-kn-sourcesList__ApiServerSource-SinkNotFound.yaml",
        named("example-source-apiserver0"),
    );
    changed(&source, |s| {
        s["metadata"]["namespace"] = json!("josh");
        s["spec"]["mode"] = json!("Resource");
        s["spec"]["sink"] = json!({"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "example-broker0"}});
        for condition in s["status"]["conditions"].as_array_mut().unwrap() {
            condition["status"] = json!("True");
            condition.as_object_mut().unwrap().remove("reason");
        }
    })
}

#[test]
fn the_own_trigger_pointed_elsewhere_breaks_the_pipeline_and_its_edit_is_critical() {
    let mut sim = Sim::with_rules(OWN_PATH);
    let ready = trigger();
    sim.send("add", &ready);
    let redirected = changed(&ready, |t| {
        t["spec"]["subscriber"]["ref"]["name"] = json!("somewhere-else");
        written_by(
            t,
            "kubectl-edit",
            "Update",
            json!({"f:spec": {"f:subscriber": {"f:ref": {"f:name": {}}}}}),
            "2021-01-15T09:00:00Z",
        );
    });
    sim.send("update", &redirected);
    sim.wait(61);
    check(
        sim.notified(),
        &[
            "firing manual_edit Trigger/example-trigger0",
            "firing pipeline_broken Trigger/example-trigger0",
        ],
    );
    assert_eq!(sim.last("manual_edit").drift.severity.as_str(), "critical");
    let broken = &sim.last("pipeline_broken").drift;
    assert_eq!(broken.severity.as_str(), "critical");
    assert!(
        broken
            .evidence
            .summary
            .contains("its subscriber is somewhere-else instead of Service aaa"),
        "{}",
        broken.evidence.summary
    );
}

#[test]
fn a_deleted_own_broker_stays_broken_until_it_is_created_again() {
    let mut sim = Sim::with_rules(OWN_PATH);
    let ready = broker();
    sim.send("add", &ready);
    sim.send("delete", &changed(&ready, |_| {}));
    sim.wait(61);
    check(
        sim.notified(),
        &["firing pipeline_broken Broker/example-broker0"],
    );
    let recreated = changed(&ready, |b| {
        b["metadata"]["uid"] = json!("5a0d8c43-1f0e-4c3b-9a51-6c1f2f7f0c11");
    });
    sim.send("add", &recreated);
    check(
        sim.notified(),
        &[
            "firing pipeline_broken Broker/example-broker0",
            "resolved pipeline_broken Broker/example-broker0",
        ],
    );
}

#[test]
fn a_blind_source_is_found_by_resync_and_an_event_ends_it() {
    let mut sim = Sim::with_rules(OWN_PATH);
    sim.send("add", &own_source());
    // The first pass after a start is not judged: changes made while the sink was down are
    // missed by design.
    sim.wait(1);
    sim.resync_pass(5);
    sim.wait(600);
    // Events kept arriving: a pass that finds nothing missed is no finding either.
    sim.resync_pass(0);
    sim.wait(600);
    sim.resync_pass(3);
    sim.wait(61);
    check(
        sim.notified(),
        &["firing pipeline_broken ApiServerSource/example-source-apiserver0"],
    );
    let summary = &sim.last("pipeline_broken").drift.evidence.summary;
    assert!(
        summary
            .contains("resync found 3 change(s) the events never delivered: the source is blind"),
        "{summary}"
    );
    // An event arrives again.
    sim.send("update", &changed(&trigger(), |_| {}));
    check(
        sim.notified(),
        &[
            "firing pipeline_broken ApiServerSource/example-source-apiserver0",
            "resolved pipeline_broken ApiServerSource/example-source-apiserver0",
        ],
    );
}

#[test]
fn a_pass_that_misses_changes_while_events_arrive_is_not_blindness() {
    let mut sim = Sim::with_rules(OWN_PATH);
    sim.send("add", &own_source());
    sim.resync_pass(0);
    sim.wait(300);
    // An event in between: the source sees, even if it missed a filtered kind's change.
    sim.send("add", &trigger());
    sim.wait(300);
    sim.resync_pass(4);
    sim.wait(3600);
    check(sim.notified(), &[]);
}

// ---- serving internals, DomainMapping, the v1beta1 operator (tests/fixtures/knative/derived) --

#[test]
fn a_pod_autoscaler_scaling_up_and_to_zero_is_benign() {
    let mut sim = Sim::new();
    sim.send("add", &derived("serverlessservice-proxy-ready.yaml"));
    sim.send("add", &derived("podautoscaler-active.yaml"));
    sim.send("update", &derived("podautoscaler-scaling-up.yaml"));
    sim.send("update", &derived("serverlessservice-serve.yaml"));
    sim.wait(60);
    sim.send("update", &derived("podautoscaler-active.yaml"));
    sim.wait(900);
    sim.send(
        "update",
        &derived("serverlessservice-proxy-scaled-to-zero.yaml"),
    );
    sim.send("update", &derived("podautoscaler-scaled-to-zero.yaml"));
    sim.wait(3600);
    check(sim.notified(), &[]);
}

#[test]
fn a_pod_autoscaler_short_of_replicas_is_scale_unreachable_only() {
    let mut sim = Sim::new();
    sim.send("add", &derived("podautoscaler-below-min-scale.yaml"));
    sim.wait(299);
    check(sim.notified(), &[]);
    sim.wait(3600);
    check(
        sim.notified(),
        &["firing scale_unreachable PodAutoscaler/knative-webapp-00002"],
    );
    let fired = &sim.last("scale_unreachable").drift;
    assert_eq!(fired.severity.as_str(), "warning");
    assert!(
        fired.evidence.summary.starts_with(
            "PodAutoscaler/myapp/knative-webapp-00002 wants 3 replicas of Revision myapp/knative-webapp-00002 but has 1: Active=Unknown (Queued)"
        ),
        "{}",
        fired.evidence.summary
    );
}

#[test]
fn a_firing_shortfall_flapping_between_one_replica_and_none_is_told_once() {
    // Its severity moves with the scale (warning with one replica, critical with none): only a
    // class that escalates on purpose (`certificate_expiring`) tells a firing drift again.
    let mut sim = Sim::new();
    let short = derived("podautoscaler-below-min-scale.yaml");
    sim.send("add", &short);
    sim.wait(3600);
    let none = changed(&short, |o| o["status"]["actualScale"] = json!(0));
    sim.send("update", &none);
    let severity = |sim: &Sim| {
        sim.engine()
            .open_drifts()
            .find(|drift| drift.class == "scale_unreachable")
            .map(|drift| drift.severity.as_str())
    };
    assert_eq!(severity(&sim), Some("critical"), "{:?}", sim.lines());
    sim.send(
        "update",
        &changed(&none, |o| o["status"]["actualScale"] = json!(1)),
    );
    sim.send(
        "update",
        &changed(&none, |o| o["status"]["actualScale"] = json!(0)),
    );
    check(
        sim.notified(),
        &["firing scale_unreachable PodAutoscaler/knative-webapp-00002"],
    );
}

#[test]
fn a_kingress_re_reconciled_by_its_controller_is_benign() {
    let mut sim = Sim::new();
    sim.send("add", &derived("ingress-ready.yaml"));
    sim.send("update", &derived("ingress-load-balancer-not-ready.yaml"));
    sim.wait(8);
    sim.send("update", &derived("ingress-ready.yaml"));
    sim.wait(3600);
    check(sim.notified(), &[]);
}

#[test]
fn a_kingress_whose_load_balancer_never_comes_is_not_ready() {
    let mut sim = Sim::new();
    sim.send("add", &derived("ingress-load-balancer-not-ready.yaml"));
    sim.wait(181);
    check(sim.notified(), &["firing not_ready Ingress/hello"]);
    let summary = &sim.last("not_ready").drift.evidence.summary;
    assert!(
        summary.starts_with("Ingress/default/hello is not ready: LoadBalancerReady=Unknown (Uninitialized): Waiting for load balancer to be ready"),
        "{summary}"
    );
}

#[test]
fn a_route_waiting_on_its_certificate_is_one_alert_with_the_chain() {
    let mut sim = Sim::new();
    // The Certificate fails first; its Route reports it a moment later.
    let route = route();
    sim.send("add", &route);
    sim.send("add", &derived("certificate-not-ready.yaml"));
    sim.wait(20);
    let waiting = changed(&route, |r| {
        for condition in r["status"]["conditions"].as_array_mut().unwrap() {
            if condition["type"] == "CertificateProvisioned" || condition["type"] == "Ready" {
                condition["status"] = json!("Unknown");
                condition["reason"] = json!("CertificateNotReady");
                condition["message"] =
                    json!("Certificate route-6a3f0955-7515-421d-9d01-0a595b510839 is not ready.");
            }
        }
    });
    sim.send("update", &waiting);
    sim.wait(3600);
    check(sim.notified(), &["firing not_ready Route/knative-webapp"]);
    let fired = &sim.last("not_ready").drift;
    let chain: Vec<Value> = serde_json::from_str(&fired.evidence.facts["conditionChain"]).unwrap();
    assert_eq!(chain.len(), 2, "{chain:?}");
    assert_eq!(chain[0]["condition"], "CertificateProvisioned");
    assert_eq!(chain[1]["kind"], "Certificate");
    assert_eq!(chain[1]["reason"], "NoCertManagerCertCondition");
    assert!(fired
        .evidence
        .summary
        .contains("chain: Route CertificateProvisioned=Unknown → Certificate Ready=Unknown"));
}

#[test]
fn a_domain_mapping_whose_domain_is_taken_is_not_ready() {
    let mut sim = Sim::new();
    sim.send("add", &derived("domainmapping-domain-already-claimed.yaml"));
    sim.wait(181);
    check(
        sim.notified(),
        &["firing not_ready DomainMapping/webapp.jarvis.cpod-nsxv8.az-stc.cloud-garage.net"],
    );
    assert_eq!(
        sim.last("not_ready").drift.evidence.facts["reason"],
        "DomainAlreadyClaimed"
    );
}

#[test]
fn a_brokers_lost_dead_letter_sink_is_one_alert_on_the_broker() {
    // These objects are k8s/'s own Broker and Trigger; here they are watched as any other.
    let mut sim = Sim::with_rules("ownPipeline: {namespace: elsewhere}");
    sim.send("add", &derived("broker-ready.yaml"));
    sim.send("add", &derived("trigger-ready.yaml"));
    sim.send(
        "update",
        &derived("broker-dead-letter-sink-unresolved.yaml"),
    );
    sim.send("update", &derived("trigger-broker-not-ready.yaml"));
    sim.wait(3600);
    check(
        sim.notified(),
        &["firing event_delivery_broken Broker/drift-sentinel"],
    );
    assert_summary(
        &sim,
        "event_delivery_broken",
        "DeadLetterSinkResolved=False (Unable to get the dead letter sink's URI)",
        "; dead-letter sink Service drift-sentinel/drift-sentinel-dlq",
    );
}

#[test]
fn the_broker_starting_as_its_controller_writes_it_is_benign() {
    let mut sim = Sim::new();
    sim.send("add", &derived("broker-created.yaml"));
    sim.send("update", &derived("broker-startup.yaml"));
    sim.wait(2);
    sim.send("update", &derived("broker-ready.yaml"));
    sim.send("add", &derived("trigger-ready.yaml"));
    sim.wait(3600);
    check(sim.notified(), &[]);
}

#[test]
fn an_operator_upgrade_across_minors_is_stuck_and_one_that_completes_is_not() {
    let mut sim = Sim::new();
    sim.send("add", &derived("knativeserving-ready-1.22.1.yaml"));
    sim.send(
        "update",
        &derived("knativeserving-upgrade-in-progress.yaml"),
    );
    sim.wait(420);
    sim.send("update", &derived("knativeserving-upgraded-1.23.0.yaml"));
    sim.wait(3600);
    // The upgrade raised no condition alert; the `kubectl apply` that asked for it is a manual
    // edit of spec.version, as every kubectl apply is (a GitOps controller is trusted).
    check(
        sim.notified(),
        &["firing manual_edit KnativeServing/knative-serving"],
    );
    assert!(sim
        .last("manual_edit")
        .drift
        .evidence
        .changes
        .iter()
        .any(|change| change.path == "/spec/version"));
    // Another cluster's operator was asked to skip a minor version.
    sim.send("add", &derived("knativeserving-upgrade-not-eligible.yaml"));
    sim.wait(901);
    check(
        sim.notified(),
        &[
            "firing manual_edit KnativeServing/knative-serving",
            "firing operator_upgrade_stuck KnativeServing/knative-serving",
        ],
    );
    let summary = &sim.last("operator_upgrade_stuck").drift.evidence.summary;
    assert!(
        summary.contains("is stuck upgrading from 1.21.3 to 1.23.0: VersionMigrationEligible=False (Error): Version migration is not eligible"),
        "{summary}"
    );
}

#[test]
fn a_broken_own_broker_is_one_pipeline_alert_not_three() {
    // k8s/'s own Broker loses its dead-letter sink; the own Trigger follows it.
    let mut sim = Sim::new();
    sim.send("add", &derived("broker-ready.yaml"));
    sim.send("add", &derived("trigger-ready.yaml"));
    sim.send(
        "update",
        &derived("broker-dead-letter-sink-unresolved.yaml"),
    );
    sim.send("update", &derived("trigger-broker-not-ready.yaml"));
    sim.wait(3600);
    check(
        sim.notified(),
        &["firing pipeline_broken Broker/drift-sentinel"],
    );
}

#[test]
fn a_ping_source_firing_on_schedule_is_benign() {
    // Firing sends events to the sink; the PingSource object itself only sees its controller
    // re-writing status (condition times move, nothing else).
    let mut sim = Sim::new();
    let mut ping = derived("pingsource-ready.yaml");
    sim.send("add", &ping);
    for minute in 0..30 {
        ping = changed(&ping, |p| {
            for condition in p["status"]["conditions"].as_array_mut().unwrap() {
                condition["lastTransitionTime"] = json!(format!("2026-06-15T15:{minute:02}:00Z"));
            }
        });
        sim.send("update", &ping);
        sim.wait(60);
    }
    check(sim.notified(), &[]);
}

/// `object` as Argo CD manages it: its `kubectl-client-side-apply` entry becomes Argo CD's.
fn synced_by_argo_cd(object: &Value) -> Value {
    changed(object, |o| {
        for entry in o["metadata"]["managedFields"].as_array_mut().unwrap() {
            if entry["manager"] == "kubectl-client-side-apply" {
                entry["manager"] = json!("argocd-application-controller");
                entry["operation"] = json!("Apply");
            }
        }
        o["metadata"]["labels"]["argocd.argoproj.io/instance"] = json!("eventing-app");
    })
}

#[test]
fn argo_cd_syncing_an_eventing_app_and_an_operator_upgrade_is_benign() {
    let mut sim = Sim::with_rules("ownPipeline: {namespace: elsewhere}");
    // The sync creates a Broker and its Trigger; the Broker starts as its controller writes it.
    sim.send(
        "add",
        &synced_by_argo_cd(&fixture_yaml("derived/broker-created.yaml")),
    );
    sim.send(
        "update",
        &synced_by_argo_cd(&fixture_yaml("derived/broker-startup.yaml")),
    );
    let trigger = synced_by_argo_cd(&fixture_yaml("derived/trigger-ready.yaml"));
    sim.send("add", &trigger);
    sim.wait(3);
    sim.send(
        "update",
        &synced_by_argo_cd(&fixture_yaml("derived/broker-ready.yaml")),
    );
    // A later sync changes the Trigger's filter from Git.
    let resynced = changed(&trigger, |t| {
        t["spec"]["filter"] =
            json!({"attributes": {"type": "dev.knative.apiserver.resource.update"}});
        written_by(
            t,
            "argocd-application-controller",
            "Apply",
            json!({"f:spec": {"f:filter": {"f:attributes": {"f:type": {}}}}}),
            "2026-06-15T15:00:00Z",
        );
    });
    sim.send("update", &resynced);
    // The same repository upgrades Knative through the operator.
    sim.send(
        "add",
        &synced_by_argo_cd(&fixture_yaml("derived/knativeserving-ready-1.22.1.yaml")),
    );
    sim.send(
        "update",
        &synced_by_argo_cd(&fixture_yaml(
            "derived/knativeserving-upgrade-in-progress.yaml",
        )),
    );
    sim.wait(420);
    sim.send(
        "update",
        &synced_by_argo_cd(&fixture_yaml("derived/knativeserving-upgraded-1.23.0.yaml")),
    );
    sim.wait(3600);
    check(sim.notified(), &[]);
}

#[test]
fn a_channel_whose_dispatcher_has_no_endpoints_is_a_critical_not_ready() {
    let mut sim = Sim::new();
    sim.send("add", &derived("channel-ready.yaml"));
    sim.send("update", &derived("channel-backing-channel-not-ready.yaml"));
    sim.wait(181);
    check(sim.notified(), &["firing not_ready Channel/my-channel"]);
    let fired = &sim.last("not_ready").drift;
    assert_eq!(fired.severity.as_str(), "critical");
    assert!(fired.evidence.summary.contains(
        "BackingChannelReady=False (DispatcherEndpointsNotReady): There are no endpoints ready for Dispatcher service"
    ));
}

#[test]
fn a_ping_source_whose_sink_is_gone_is_event_delivery_broken() {
    let mut sim = Sim::new();
    sim.send("add", &derived("pingsource-ready.yaml"));
    sim.send("update", &derived("pingsource-sink-not-found.yaml"));
    sim.wait(121);
    check(
        sim.notified(),
        &["firing event_delivery_broken PingSource/test-ping-source"],
    );
    let summary = &sim.last("event_delivery_broken").drift.evidence.summary;
    assert!(
        summary.ends_with("SinkProvided=False (NotFound); sink Service default/event-display"),
        "{summary}"
    );
}

#[test]
fn a_brokers_dead_letter_sink_deleted_by_hand_and_its_class_changed_are_manual_edits() {
    let mut sim = Sim::with_rules("ownPipeline: {namespace: elsewhere}");
    let ready = derived("broker-ready.yaml");
    sim.send("add", &ready);
    let stripped = changed(&ready, |b| {
        b["spec"]["delivery"]
            .as_object_mut()
            .unwrap()
            .remove("deadLetterSink");
        written_by(
            b,
            "kubectl-edit",
            "Update",
            json!({"f:spec": {"f:delivery": {"f:retry": {}}}}),
            "2026-06-15T15:00:00Z",
        );
    });
    sim.send("update", &stripped);
    check(
        sim.notified(),
        &["firing manual_edit Broker/drift-sentinel"],
    );
    let fired = sim.last("manual_edit").drift.clone();
    assert!(fired
        .evidence
        .changes
        .iter()
        .any(|change| change.path == "/spec/delivery/deadLetterSink"
            && change.before.is_some()
            && change.after.is_none()));

    let mut sim = Sim::with_rules("ownPipeline: {namespace: elsewhere}");
    sim.send("add", &ready);
    let reclassed = changed(&ready, |b| {
        b["metadata"]["annotations"]["eventing.knative.dev/broker.class"] = json!("Kafka");
        written_by(
            b,
            "kubectl-annotate",
            "Update",
            json!({"f:metadata": {"f:annotations": {"f:eventing.knative.dev/broker.class": {}}}}),
            "2026-06-15T15:00:00Z",
        );
    });
    sim.send("update", &reclassed);
    let fired = &sim.last("manual_edit").drift;
    assert_eq!(fired.severity.as_str(), "warning");
    assert_eq!(
        fired.evidence.changes[0].path,
        "/metadata/annotations/eventing.knative.dev~1broker.class"
    );
}

/// A shipped manifest from `k8s/`, as the API server would hold it once reconciled: with a uid,
/// a resourceVersion and a Ready status.
fn shipped(file: &str, uid: &str) -> Value {
    let text =
        std::fs::read_to_string(format!("{}/k8s/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let mut object: Value = serde_saphyr::from_str(&text).unwrap();
    object["metadata"]["uid"] = json!(uid);
    object["metadata"]["generation"] = json!(1);
    object["status"] = json!({"observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": "True"}]});
    changed(&object, |_| {})
}

#[test]
fn the_shipped_event_path_is_what_own_pipeline_expects_by_default() {
    // rules.ownPipeline's defaults name k8s/'s objects, and those objects point where the class
    // checks they point: a fresh install is healthy, and a Trigger pointed elsewhere is not.
    let mut sim = Sim::new();
    let source = shipped(
        "apiserversource.yaml",
        "0d9f2a41-5a4e-4c1b-9d55-0a1b2c3d4e01",
    );
    let broker = shipped("broker.yaml", "0d9f2a41-5a4e-4c1b-9d55-0a1b2c3d4e02");
    let trigger = shipped("trigger.yaml", "0d9f2a41-5a4e-4c1b-9d55-0a1b2c3d4e03");
    for object in [&source, &broker, &trigger] {
        sim.send("add", object);
    }
    sim.wait(3600);
    check(sim.notified(), &[]);
    sim.send(
        "update",
        &changed(&trigger, |t| t["spec"]["broker"] = json!("default")),
    );
    sim.wait(61);
    check(
        sim.notified(),
        &["firing pipeline_broken Trigger/drift-sentinel"],
    );
}
