//! One failure is one alert, whatever order Knative's controllers write their objects in, and
//! drift-sentinel's own event path is judged right across restarts: a Subscription written
//! before its Trigger, a Trigger's event before its Broker's, a blind source after a restart,
//! deletions inferred by resync, plumbing behind a benignly not-ready owner, owner-reference
//! cycles, operator upgrades, a Revision's shortfall before its autoscalers. Objects come from `tests/fixtures/knative` (mostly `derived/`, Scenario D: drift-sentinel's
//! own Broker, Trigger and the Trigger's Subscription, whose resourceVersions give the order the
//! controllers wrote them in).

use serde_json::{json, Value};

use crate::scenario::*;
use crate::support::fixture_yaml;

/// The own path as the fixtures of `knative_kinds.rs` name it is not needed here: Scenario D's
/// objects are `k8s/`'s own (namespace, Broker, Trigger and source all `drift-sentinel`), so
/// the default `rules.ownPipeline` applies; `ELSEWHERE` watches them as any other objects.
const ELSEWHERE: &str = "ownPipeline: {namespace: elsewhere}";

// ---- 1. A Trigger-owned Subscription reported before its Trigger: two alerts ----------------

/// The Broker's dead-letter sink Service is deleted. The controllers write, in this order
/// (resourceVersions 73905, 73908, 73911 in `derived/README.md`): the Broker
/// (`DeadLetterSinkResolved=False`), the Trigger's Subscription (`ReferencesResolved=False
/// DeadLetterSinkResolveFailed`), the Trigger (`BrokerReady=False`). One failure; the Broker's
/// finding is the one alert (as `a_brokers_lost_dead_letter_sink_is_one_alert_on_the_broker`
/// says without the Subscription). The Subscription's `event_delivery_broken` opened while its
/// Trigger still said Ready, and nothing closes it when the Trigger turns not ready: it fires
/// as a second alert.
#[test]
fn a_subscription_written_before_its_trigger_is_a_second_alert_for_one_lost_dead_letter_sink() {
    let mut sim = Sim::with_rules(ELSEWHERE);
    sim.send("add", &derived("broker-ready.yaml"));
    sim.send("add", &derived("trigger-ready.yaml"));
    sim.send("add", &derived("subscription-trigger-owned-ready.yaml"));
    sim.send(
        "update",
        &derived("broker-dead-letter-sink-unresolved.yaml"),
    );
    sim.send(
        "update",
        &derived("subscription-trigger-owned-dead-letter-sink-unresolved.yaml"),
    );
    sim.send("update", &derived("trigger-broker-not-ready.yaml"));
    sim.wait(3600);
    check(
        sim.notified(),
        &["firing event_delivery_broken Broker/drift-sentinel"],
    );
}

/// The same with the default `ownPipeline` (these are drift-sentinel's own objects): the own
/// Broker's `pipeline_broken` should be the one alert (`a_broken_own_broker_is_one_pipeline_alert_not_three`),
/// but the own Trigger's Subscription fires `event_delivery_broken` beside it.
#[test]
fn a_broken_own_broker_with_its_triggers_subscription_is_still_one_alert() {
    let mut sim = Sim::new();
    sim.send("add", &derived("broker-ready.yaml"));
    sim.send("add", &derived("trigger-ready.yaml"));
    sim.send("add", &derived("subscription-trigger-owned-ready.yaml"));
    sim.send(
        "update",
        &derived("broker-dead-letter-sink-unresolved.yaml"),
    );
    sim.send(
        "update",
        &derived("subscription-trigger-owned-dead-letter-sink-unresolved.yaml"),
    );
    sim.send("update", &derived("trigger-broker-not-ready.yaml"));
    sim.wait(3600);
    check(
        sim.notified(),
        &["firing pipeline_broken Broker/drift-sentinel"],
    );
}

// ---- 2. A Trigger's event before its Broker's: two alerts -----------------------------------

/// The ApiServerSource watches Brokers and Triggers on separate watches, and the Broker
/// delivers the events concurrently: the Trigger's `BrokerReady=False` can arrive before the
/// Broker's own not-ready state. The Trigger's `event_delivery_broken` then opens (its Broker is
/// tracked and still says Ready) and nothing re-assesses it when the Broker's state arrives; both
/// fire for one failure. `check` handles this order (`Engine::reevaluate_all`), the sink does not.
#[test]
fn a_triggers_event_before_its_brokers_is_still_one_alert_on_the_broker() {
    let mut sim = Sim::with_rules(ELSEWHERE);
    sim.send("add", &derived("broker-ready.yaml"));
    sim.send("add", &derived("trigger-ready.yaml"));
    sim.send("update", &derived("trigger-broker-not-ready.yaml"));
    sim.send(
        "update",
        &derived("broker-dead-letter-sink-unresolved.yaml"),
    );
    sim.wait(3600);
    check(
        sim.notified(),
        &["firing event_delivery_broken Broker/drift-sentinel"],
    );
}

// ---- 3-5. The blind-source rule ---------------------------------------------------------------

/// The own ApiServerSource (Scenario D), ready.
fn own_source() -> Value {
    derived("apiserversource-ready.yaml")
}

/// A blind source alert fires; drift-sentinel is restarted (the natural first reaction, or part
/// of the repair); the source is repaired and events flow again, and resync passes find nothing
/// missed. The blindness record lived in memory only, so after the restart no event and no pass
/// ever re-evaluates the ApiServerSource: the critical alert, sent to every channel, stays
/// firing (with reminders) until the ApiServerSource object itself happens to change.
#[test]
fn a_blind_source_alert_resolves_after_a_restart_once_events_flow_again() {
    let mut sim = Sim::new();
    sim.send("add", &own_source());
    sim.wait(1);
    sim.resync_pass(0);
    sim.wait(600);
    sim.resync_pass(3);
    sim.wait(61);
    check(
        sim.notified(),
        &["firing pipeline_broken ApiServerSource/drift-sentinel"],
    );
    sim.stop_gracefully();
    sim.restart();
    sim.wait(1);
    // Events arrive again, and resync keeps finding nothing missed.
    sim.send("add", &derived("broker-ready.yaml"));
    sim.send("add", &derived("trigger-ready.yaml"));
    sim.wait(600);
    sim.resync_pass(0);
    sim.send("add", &derived("pingsource-ready.yaml"));
    sim.wait(600);
    sim.resync_pass(0);
    sim.wait(600);
    check(
        sim.notified(),
        &[
            "firing pipeline_broken ApiServerSource/drift-sentinel",
            "resolved pipeline_broken ApiServerSource/drift-sentinel",
        ],
    );
}

/// The source is blind and the alert fired. The next resync pass finds no change (the cluster
/// went quiet) and still no event arrived: nothing says the source sees again, yet the alert is
/// resolved to every channel, and fires again at the next change: a flapping critical alert
/// whose "resolved" is false.
#[test]
fn a_blind_source_stays_blind_until_an_event_arrives() {
    let mut sim = Sim::new();
    sim.send("add", &own_source());
    sim.wait(1);
    sim.resync_pass(0);
    sim.wait(600);
    sim.resync_pass(3);
    sim.wait(61);
    sim.wait(600);
    // No event since long before the previous pass; nothing new to find.
    sim.resync_pass(0);
    sim.wait(600);
    check(
        sim.notified(),
        &["firing pipeline_broken ApiServerSource/drift-sentinel"],
    );
}

/// A blind source whose resync pass also infers a deletion: `Engine::forget` applies the
/// deletion through `Engine::apply`, which notes it as an event that arrived, so the pass is not
/// "quiet" and the blindness is never found (and an open blindness finding is resolved by any
/// pass that infers a deletion). Events stopped ten minutes ago; resync found an update and a
/// deletion no event delivered: that is exactly the issue's "source is blind".
#[test]
fn a_deletion_inferred_by_resync_is_not_an_event_that_arrived() {
    let mut rig = Sim::new();
    rig.send("add", &own_source());
    let ping = derived("pingsource-ready.yaml");
    rig.send("add", &ping);
    rig.wait(1);
    rig.resync_pass(0);
    rig.wait(600);
    // The next pass: the PingSource is gone (no delete event came), plus one listed change.
    rig.sweep(ping["metadata"]["uid"].as_str().unwrap());
    rig.resync_pass(2);
    rig.wait(61);
    assert!(
        rig.lines()
            .contains(&"firing pipeline_broken ApiServerSource/drift-sentinel".to_string()),
        "no blind-source finding: {:#?}",
        rig.lines()
    );
}

// ---- 6. drift_sentinel_pipeline_ready after a restart -----------------------------------------

/// The own Broker is not ready: `drift_sentinel_pipeline_ready{part="broker"}` is 0 and the
/// shipped `DriftSentinelPipelineBroken` rule fires. drift-sentinel restarts: the readiness
/// record lives in memory only and is filled only when an own part's event is applied, so the
/// gauge is absent until the Broker changes again; `min(...) == 0` has no series and the
/// Prometheus alert resolves while the Broker is still broken (and no event can come through a
/// broken Broker to refill it; a resync list of the same resourceVersion is stale).
#[test]
fn pipeline_readiness_survives_a_restart() {
    let mut rig = Sim::new();
    rig.send("add", &derived("broker-ready.yaml"));
    rig.send(
        "update",
        &derived("broker-dead-letter-sink-unresolved.yaml"),
    );
    let before = rig.pipeline_readiness();
    assert_eq!(
        before,
        Some(vec![("prod".to_string(), "broker", false)]),
        "the broken own Broker is exported as 0 before the restart"
    );
    rig.restart();
    rig.wait(1);
    rig.send("add", &derived("pingsource-ready.yaml"));
    let after = rig.pipeline_readiness();
    assert_eq!(
        after,
        Some(vec![("prod".to_string(), "broker", false)]),
        "after a restart the gauge of the still broken own Broker is gone"
    );
}

/// README: "`drift_sentinel_pipeline_ready{cluster,part}` and the `DriftSentinelPipelineBroken`
/// rule report the same" as `pipeline_broken`. A blind source is a `pipeline_broken` finding on
/// the ApiServerSource, but its part stays exported as ready (1).
#[test]
fn a_blind_source_is_not_exported_as_ready() {
    let mut rig = Sim::new();
    rig.send("add", &own_source());
    assert_eq!(
        rig.pipeline_readiness(),
        Some(vec![("prod".to_string(), "apiserversource", true)])
    );
    rig.wait(1);
    rig.resync_pass(0);
    rig.wait(600);
    rig.resync_pass(3);
    rig.wait(61);
    assert!(rig
        .lines()
        .contains(&"firing pipeline_broken ApiServerSource/drift-sentinel".to_string()));
    assert_eq!(
        rig.pipeline_readiness(),
        Some(vec![("prod".to_string(), "apiserversource", false)]),
        "the blind source's part is still exported as ready"
    );
}

// ---- 7. rules.scope silences the self-watch ---------------------------------------------------

/// A team scopes drift-sentinel to its namespaces (`rules.scope.namespaces`, documented as
/// "which objects drifts are reported for"). drift-sentinel's own Broker is then out of scope:
/// its deletion, which blinds the sink, opens nothing, although `pipeline_broken` is documented
/// as "sent to every channel whatever the routes say" (and `not_ready`/`event_delivery_broken`
/// step aside for it on the own path). The sink goes blind in silence.
#[test]
fn scope_does_not_silence_the_own_event_path() {
    let mut sim = Sim::with_rules("scope: {namespaces: ['payments-*']}");
    let ready = derived("broker-ready.yaml");
    sim.send("add", &ready);
    sim.send("delete", &changed(&ready, |_| {}));
    sim.wait(61);
    check(
        sim.notified(),
        &["firing pipeline_broken Broker/drift-sentinel"],
    );
}

// ---- 8. Plumbing deferred to an owner that is not ready for a benign reason -------------------

/// A Revision scaled to zero: its PodAutoscaler is `Ready=False NoTraffic` (benign, never
/// reported). Its ServerlessService fails for a real reason (`EndpointsPopulated=False
/// NotOwned`: a Service of that name exists that the SKS does not own). `reporting_owner` defers
/// the SKS to the PodAutoscaler because the PodAutoscaler is "not ready", but the PodAutoscaler's
/// not-ready is benign and reports nothing: the failure is hidden for as long as the Revision
/// stays at zero, i.e. until the first request fails.
#[test]
fn plumbing_is_not_hidden_behind_an_owner_that_is_benignly_not_ready() {
    let mut sim = Sim::new();
    sim.send("add", &derived("podautoscaler-scaled-to-zero.yaml"));
    let not_owned = changed(
        &fixture_yaml("derived/serverlessservice-proxy-scaled-to-zero.yaml"),
        |sks| {
            let message = "Resource knative-webapp-00001 of type Service is not owned by SKS";
            set_condition(sks, "EndpointsPopulated", "False", "NotOwned", message);
            set_condition(sks, "Ready", "False", "NotOwned", message);
        },
    );
    sim.send("add", &not_owned);
    sim.wait(3600);
    check(
        sim.notified(),
        &["firing not_ready ServerlessService/knative-webapp-00001"],
    );
}

// ---- 9. Owner-reference cycles hide failures --------------------------------------------------

/// Two KIngresses whose controller owner references name each other (hand-made or forged
/// objects; the API server accepts any owner reference). Both are not ready; each is deferred
/// to the other as its "reporting owner" and neither reports: a failure hidden forever by input.
/// The chain walk itself stops on the cycle (that part holds).
#[test]
fn an_owner_reference_cycle_does_not_hide_both_failures() {
    let mut sim = Sim::new();
    let base = fixture_yaml("derived/ingress-load-balancer-not-ready.yaml");
    let first_uid = "9f0c6e4a-0000-4000-8000-000000000001";
    let second_uid = "9f0c6e4a-0000-4000-8000-000000000002";
    let make = |name: &str, uid: &str, owner_name: &str, owner_uid: &str| {
        changed(&base, |ingress| {
            ingress["metadata"]["name"] = json!(name);
            ingress["metadata"]["uid"] = json!(uid);
            ingress["metadata"]["ownerReferences"] = json!([{
                "apiVersion": "networking.internal.knative.dev/v1alpha1",
                "kind": "Ingress",
                "name": owner_name,
                "uid": owner_uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }]);
        })
    };
    sim.send("add", &make("one", first_uid, "two", second_uid));
    sim.send("add", &make("two", second_uid, "one", first_uid));
    // Each re-reconciled once more, now that the other is tracked.
    sim.send("update", &make("one", first_uid, "two", second_uid));
    sim.send("update", &make("two", second_uid, "one", first_uid));
    sim.wait(3600);
    let fired: Vec<String> = sim
        .notified()
        .into_iter()
        .filter(|line| line.starts_with("firing not_ready Ingress/"))
        .collect();
    assert!(
        !fired.is_empty(),
        "neither KIngress of the cycle is reported: {:?}",
        sim.lines()
    );
}

// ---- 10. An operator upgrade without spec.version ----------------------------------------------

/// Most operator installs leave `spec.version` unset: the operator installs the newest version
/// it bundles, so upgrading the operator upgrades Knative. That upgrade is the same as one asked
/// for by `spec.version` (`status.manifests` move to the new version while `status.version`
/// stays at the old one, `DeploymentsAvailable=False` while the Deployments roll), but
/// `operator_upgrade_stuck::upgrading` needs `spec.version`, so `not_ready` does not step aside
/// and its 3-minute grace, not the upgrade's 15, applies: an upgrade that takes seven minutes (as
/// `an_operator_upgrade_across_minors_is_stuck_and_one_that_completes_is_not` lets the pinned one
/// take) fires a critical `not_ready`. The same holds for a first install (`status.version`
/// empty) without `spec.version`.
#[test]
fn an_operator_upgrade_driven_by_the_operator_itself_is_benign() {
    let unpinned = |file: &str| {
        changed(&fixture_yaml(&format!("derived/{file}")), |serving| {
            serving["spec"].as_object_mut().unwrap().remove("version");
        })
    };
    let mut sim = Sim::new();
    sim.send("add", &unpinned("knativeserving-ready-1.22.1.yaml"));
    sim.send(
        "update",
        &unpinned("knativeserving-upgrade-in-progress.yaml"),
    );
    sim.wait(420);
    sim.send("update", &unpinned("knativeserving-upgraded-1.23.0.yaml"));
    sim.wait(3600);
    check(sim.notified(), &[]);
}

/// The same order problem between a Revision and its PodAutoscaler: the Revision's
/// `actualReplicas`/`desiredReplicas` are copied from the PodAutoscaler, but the two kinds come
/// on separate watches. When the Revision's shortfall arrives before the PodAutoscaler's,
/// `replica_drift` opens (its PodAutoscaler is tracked but not short yet) and nothing closes it
/// when the PodAutoscaler's `scale_unreachable` opens: two warnings for one shortfall, which the
/// README says `replica_drift` "leaves to this class".
#[test]
fn a_revisions_shortfall_before_its_autoscalers_is_one_alert() {
    let mut sim = Sim::new();
    let revision = changed(&revision(), |_| {});
    sim.send("add", &revision);
    sim.send("add", &derived("podautoscaler-active.yaml"));
    sim.send(
        "update",
        &changed(&revision, |r| {
            r["status"]["desiredReplicas"] = json!(3);
            r["status"]["actualReplicas"] = json!(1);
        }),
    );
    sim.send("update", &derived("podautoscaler-scaling-up.yaml"));
    sim.wait(3600);
    check(
        sim.notified(),
        &["firing scale_unreachable PodAutoscaler/knative-webapp-00001"],
    );
}

// ---- 11. A Trigger deferred to a Broker that recovers -------------------------------------------

/// The Trigger's `BrokerReady=False` is left to its not-ready Broker ("reported on its Broker";
/// `not_ready` steps aside for `event_delivery_broken`). The Broker recovers within its grace,
/// so it never alerts, but the Trigger keeps saying `Ready=False BrokerReady=False` (its
/// reconciler did not run again). The Trigger's verdict was taken when its own event arrived and
/// is never taken again: a Trigger that reports itself broken is never reported, however long.
#[test]
fn a_trigger_left_to_its_broker_is_reported_when_the_broker_recovers_without_it() {
    let mut sim = Sim::with_rules(ELSEWHERE);
    sim.send("add", &derived("broker-ready.yaml"));
    sim.send("add", &derived("trigger-ready.yaml"));
    sim.send(
        "update",
        &derived("broker-dead-letter-sink-unresolved.yaml"),
    );
    sim.send("update", &derived("trigger-broker-not-ready.yaml"));
    sim.wait(30);
    sim.send("update", &derived("broker-ready.yaml"));
    sim.wait(3600);
    assert!(
        sim.notified()
            .iter()
            .any(|line| line.ends_with(" Trigger/drift-sentinel")),
        "the Trigger that says Ready=False for an hour is never reported: {:?}",
        sim.lines()
    );
}

// ---- 12. A ContainerSource and its SinkBinding: two critical alerts for one lost sink ------------

/// A ContainerSource's sink (the `event-display` Service) is deleted. Its SinkBinding (owned by
/// the ContainerSource, `controller: true`) says `SinkProvided=False NotFound`; the
/// ContainerSource copies the SinkBinding's Ready into `SinkBindingReady=False`
/// (`PropagateSinkBindingStatus`). `event_delivery_broken` holds on the SinkBinding (not
/// "plumbing", so never reported through its owner) and `not_ready` holds on the ContainerSource
/// (`SinkBindingReady` is not one of its delivery conditions), in either order: two critical
/// alerts for one failure.
#[test]
fn a_container_source_losing_its_sink_is_one_alert() {
    let message = r#"failed to get object heartbeat-source/event-display: services.serving.knative.dev "event-display" not found"#;
    for binding_first in [true, false] {
        let mut sim = Sim::new();
        sim.send("add", &derived("containersource-ready.yaml"));
        sim.send("add", &derived("sinkbinding-ready.yaml"));
        let binding = changed(&fixture_yaml("derived/sinkbinding-ready.yaml"), |b| {
            set_condition(b, "SinkProvided", "False", "NotFound", message);
            set_condition(b, "Ready", "False", "NotFound", message);
        });
        let source = changed(&fixture_yaml("derived/containersource-ready.yaml"), |s| {
            set_condition(s, "SinkBindingReady", "False", "NotFound", message);
            set_condition(s, "Ready", "False", "NotFound", message);
        });
        if binding_first {
            sim.send("update", &binding);
            sim.send("update", &source);
        } else {
            sim.send("update", &source);
            sim.send("update", &binding);
        }
        sim.wait(3600);
        assert_eq!(
            sim.notified().len(),
            1,
            "binding first: {binding_first}; one lost sink, alerts: {:?}",
            sim.notified()
        );
    }
}

// ---- 13. A deleted own part "resolves" when its tombstone is forgotten ----------------------------

/// drift-sentinel's own Broker is deleted: `pipeline_broken` fires (it survives the delete). Six
/// hours later the Broker's tombstone is forgotten (`TOMBSTONE_RETENTION_MS`) and `tick`
/// resolves every drift of the forgotten object, this one included ("deleted object no longer
/// tracked"): every channel is told the sink's event path is repaired while the Broker is still
/// gone and no event can arrive; and nothing can open it again (no object is left to assess).
#[test]
fn a_deleted_own_broker_stays_broken_after_its_tombstone_is_forgotten() {
    let mut sim = Sim::new();
    let ready = derived("broker-ready.yaml");
    sim.send("add", &ready);
    sim.send("delete", &changed(&ready, |_| {}));
    sim.wait(61);
    sim.wait(7 * 3600);
    sim.wait(3600);
    check(
        sim.notified(),
        &["firing pipeline_broken Broker/drift-sentinel"],
    );
}

// ---- A Route's failure under its Service ------------------------------------------------------

/// net-kourier rejects a KIngress whose host another namespace's Route already has
/// (`DomainConflict`). Knative copies the reason up: the Route's `IngressReady`, then the
/// Service's `RoutesReady`. One cause: the Service's finding, whose chain names the Route and the
/// KIngress, is the one alert, whichever of the three objects' events arrives first.
#[test]
fn a_kingress_domain_conflict_is_one_alert_on_the_service() {
    let orders: [[&str; 3]; 3] = [
        [
            "service-domain-conflict.yaml",
            "route-domain-conflict.yaml",
            "ingress-domain-conflict.yaml",
        ],
        [
            "ingress-domain-conflict.yaml",
            "route-domain-conflict.yaml",
            "service-domain-conflict.yaml",
        ],
        [
            "route-domain-conflict.yaml",
            "ingress-domain-conflict.yaml",
            "service-domain-conflict.yaml",
        ],
    ];
    for order in orders {
        let mut sim = Sim::new();
        for file in order {
            sim.send("add", &derived(file));
        }
        sim.wait(3600);
        check(sim.notified(), &["firing not_ready Service/hello"]);
        let fired = sim.last("not_ready");
        let summary = &fired.drift.evidence.summary;
        assert!(
            summary
                .contains("chain: Service RoutesReady=False → Route IngressReady=False → Ingress"),
            "{order:?}: {summary}"
        );
    }
}

/// The Route's own finding still fires when its Service is absent (a Route made by hand, or a
/// Service not watched) or when the Service says it is ready (a Route edited after the Service
/// stopped owning it is not hidden).
#[test]
fn a_routes_failure_is_its_own_when_its_service_is_absent_or_ready() {
    let mut sim = Sim::new();
    sim.send("add", &derived("route-domain-conflict.yaml"));
    sim.send("add", &derived("ingress-domain-conflict.yaml"));
    sim.wait(3600);
    check(sim.notified(), &["firing not_ready Route/hello"]);

    let ready_service = changed(&derived("service-domain-conflict.yaml"), |service| {
        set_condition(service, "RoutesReady", "True", "", "");
        set_condition(service, "Ready", "True", "", "");
    });
    let mut sim = Sim::new();
    sim.send("add", &ready_service);
    sim.send("add", &derived("route-domain-conflict.yaml"));
    sim.send("add", &derived("ingress-domain-conflict.yaml"));
    sim.wait(3600);
    check(sim.notified(), &["firing not_ready Route/hello"]);
}

/// The same for a Service's Configuration: the Service copies its `Ready` into
/// `ConfigurationsReady`, so the Service's finding is the one `not_ready` alert.
#[test]
fn a_failed_configuration_is_one_alert_on_its_service() {
    let message = "Revision \"knative-webapp-00001\" failed with message: Container failed.";
    let failed_configuration = changed(&configuration(), |configuration| {
        set_condition(configuration, "Ready", "False", "RevisionFailed", message);
    });
    let failed_service = changed(&service(), |service| {
        set_condition(
            service,
            "ConfigurationsReady",
            "False",
            "RevisionFailed",
            message,
        );
        set_condition(service, "Ready", "False", "RevisionFailed", message);
    });
    for order in [
        [&failed_configuration, &failed_service],
        [&failed_service, &failed_configuration],
    ] {
        let mut sim = Sim::new();
        for object in order {
            sim.send("add", object);
        }
        sim.wait(3600);
        check(sim.notified(), &["firing not_ready Service/knative-webapp"]);
        assert_summary(
            &sim,
            "not_ready",
            "chain: Service ConfigurationsReady=False → Configuration Ready=False",
            "",
        );
    }
}
