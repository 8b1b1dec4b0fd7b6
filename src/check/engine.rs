//! The engine's state-based classes, run for real on the snapshot: every live object is applied
//! to a fresh [`Engine`] as a Resource-mode `add` event at one instant, the clock then jumps past
//! every grace period, and the drifts that fire are kept. A snapshot cannot tell how long a
//! condition has held, so it is treated as held past its grace. Deterministic: objects are applied
//! in a fixed order and the drifts are sorted.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::normalize::{Live, CLUSTER, SNAPSHOT_TIME};
use super::report::RuleOutcome;
use drift_core::classify::{classes, Engine, Rules};
use drift_core::decode::{Action, ApiServerEvent, KubeObject, Mode};
use drift_core::manifest::ManifestKey;
use drift_model::{Drift, DriftState, Millis};

/// The engine classes that apply to a snapshot (state-based), in registry order.
pub fn snapshot_classes() -> Vec<&'static str> {
    classes::REGISTRY
        .iter()
        .filter(|class| class.applies_to_snapshot())
        .map(|class| class.id())
        .collect()
}

/// Applies every live object to a fresh engine at one instant, fires everything past its grace,
/// and returns the firing drifts of the snapshot classes, in a stable order, with what each team
/// invariant found (objects it selects, how many broke it, where it could not be evaluated).
pub(crate) fn snapshot_drifts(
    live: &BTreeMap<ManifestKey, Live>,
    rules: Arc<Rules>,
) -> (Vec<Drift>, Vec<RuleOutcome>) {
    let snapshot_classes = snapshot_classes();
    let mut engine = Engine::new(Arc::clone(&rules));
    // Children before owners, so that an owner's classes see its whole family when it is
    // applied: Revisions, then Configurations, Routes, Services (a Service's assessment covers
    // its Route too).
    let rank = |object: &KubeObject| match (object.group(), object.kind.as_str()) {
        (classes::SERVING, "Revision") => 1,
        (classes::SERVING, "Configuration") => 2,
        (classes::SERVING, "Route") => 3,
        (classes::SERVING, "Service") => 4,
        _ => 0,
    };
    let mut ordered: Vec<(&ManifestKey, &Live)> = live.iter().collect();
    ordered.sort_by_key(|(key, found)| (rank(&found.object), *key));
    for (index, (_, found)) in ordered.into_iter().enumerate() {
        let object = &found.object;
        let event = ApiServerEvent {
            source: "drift-sentinel-check".to_string(),
            id: index.to_string(),
            ce_type: "dev.knative.apiserver.resource.add".to_string(),
            time: None,
            cluster: CLUSTER.to_string(),
            action: Action::Add,
            mode: Mode::Resource,
            api_version: object.api_version.clone(),
            kind: object.kind.clone(),
            namespace: object.namespace.clone(),
            name: object.name.clone(),
            object: Some(object.clone()),
        };
        engine.apply(&event, SNAPSHOT_TIME);
    }
    engine.reevaluate_all(SNAPSHOT_TIME);
    engine.tick(Millis::MAX);
    let mut drifts: Vec<Drift> = engine
        .open_drifts()
        .filter(|drift| drift.state == DriftState::Firing)
        .filter(|drift| snapshot_classes.contains(&drift.class.as_str()))
        .cloned()
        .collect();
    let order = |class: &str| {
        snapshot_classes
            .iter()
            .position(|known| *known == class)
            .unwrap_or(usize::MAX)
    };
    drifts.sort_by(|a, b| {
        (&a.namespace, &a.kind, &a.name, order(&a.class), &a.rule).cmp(&(
            &b.namespace,
            &b.kind,
            &b.name,
            order(&b.class),
            &b.rule,
        ))
    });
    let mut failures = engine.take_invariant_failures();
    failures.sort_by(|a, b| (&a.rule, &a.object).cmp(&(&b.rule, &b.object)));
    let enabled = rules.class(classes::INVARIANT).enabled;
    let outcomes = rules
        .invariants()
        .iter()
        .map(|rule| RuleOutcome {
            name: rule.name.clone(),
            description: rule.description.clone(),
            severity: rule.severity,
            transition: rule.names_old_object(),
            selected: if enabled {
                engine
                    .graph()
                    .iter()
                    .filter(|object| !object.deleted && rule.selects(object))
                    .count()
            } else {
                0
            },
            broken: drifts
                .iter()
                .filter(|drift| drift.rule.as_deref() == Some(rule.name.as_str()))
                .count(),
            errors: failures
                .iter()
                .filter(|failure| failure.rule == rule.name)
                .map(|failure| (failure.object.clone(), failure.error.clone()))
                .collect(),
        })
        .collect();
    (drifts, outcomes)
}
