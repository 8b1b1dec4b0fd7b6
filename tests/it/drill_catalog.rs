//! The shipped drill catalog (`examples/drills/knative.yaml`): it loads, every rule it expects is
//! one of the shipped team invariants (`examples/invariants/knative.yaml`), every class it
//! expects is a class, and it covers every class the issue names as injectable from outside.
//! (`tests/python/test_drills.py` checks its targets and the runner's RBAC against
//! `k8s/drills/`.)

use std::collections::BTreeSet;

fn repo(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|error| panic!("{path}: {error}"))
}

#[test]
fn the_shipped_catalog_loads_and_expects_only_shipped_rules_and_known_classes() {
    let catalog = drift_core::drill::parse(&repo("examples/drills/knative.yaml"))
        .expect("the shipped catalog loads");
    let invariants: serde_json::Value =
        serde_saphyr::from_str(&repo("examples/invariants/knative.yaml")).unwrap();
    let shipped: BTreeSet<&str> = invariants["invariants"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|rule| rule["name"].as_str())
        .collect();
    let mut classes = BTreeSet::new();
    for drill in &catalog.drills {
        if let Some(rule) = &drill.expect.rule {
            assert!(
                shipped.contains(rule.as_str()),
                "{}: rule {rule}",
                drill.name
            );
        }
        assert!(
            drift_core::classify::classes::is_known(&drill.expect.class),
            "{}",
            drill.name
        );
        classes.insert(drill.expect.class.as_str());
        assert_ne!(drill.target.kind, "Secret");
    }
    for class in [
        "manual_edit",
        "image_drift",
        "config_drift",
        "event_delivery_broken",
        "unexpected_delete",
        "invariant",
    ] {
        assert!(classes.contains(class), "no drill expects {class}");
    }
}
