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
        // With the sink's default graces a drift fires only after its grace: `within` covers it
        // (and a minute more for the event's way and the polling).
        let grace = match &drill.expect.rule {
            // The rule's own grace, else the invariant class's default (2m).
            Some(rule) => invariants["invariants"]
                .as_array()
                .unwrap()
                .iter()
                .find(|shipped| shipped["name"] == rule.as_str())
                .and_then(|shipped| shipped["grace"].as_str())
                .map(|grace| drift_model::time::parse_duration(grace).unwrap())
                .unwrap_or(std::time::Duration::from_secs(120)),
            None => {
                drift_core::classify::classes::by_id(&drill.expect.class)
                    .unwrap()
                    .defaults()
                    .grace
            }
        };
        assert!(
            drill.expect.within >= grace + std::time::Duration::from_secs(60),
            "{}: within {:?} for a default grace of {grace:?}",
            drill.name,
            drill.expect.within
        );
    }
    // A Knative-managed Deployment's image is drilled as the hand edit it is (`manual_edit`,
    // critical, at once): `image_drift` waits its 1m grace, and Knative puts its Deployment
    // back within seconds, so no team would ever see one.
    for class in [
        "manual_edit",
        "config_drift",
        "event_delivery_broken",
        "unexpected_delete",
        "invariant",
    ] {
        assert!(classes.contains(class), "no drill expects {class}");
    }
}
