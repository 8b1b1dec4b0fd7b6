//! drift-sentinel's own field manager: trusted (its writes are not hand edits) only while
//! remediation is on; with it off nothing writes as `drift-sentinel`, so an edit that claims the
//! name is a hand edit like any other.

use serde_json::json;

use crate::scenario::*;

fn pinned_by(original: &serde_json::Value, manager: &str) -> serde_json::Value {
    changed(original, |s| {
        s["spec"]["traffic"] = json!([{"revisionName": "knative-webapp-00001", "percent": 100}]);
        written_by(
            s,
            manager,
            "Update",
            json!({"f:spec": {"f:traffic": {}}}),
            "2026-12-05T09:00:00Z",
        );
    })
}

#[test]
fn drift_sentinel_is_trusted_only_while_remediation_is_on() {
    for (on, fires) in [(false, true), (true, false)] {
        let rules = drift_core::classify::Rules::default().with_remediation(on);
        let mut sim = Sim::with_compiled(rules);
        let original = service();
        sim.send("add", &original);
        sim.send("update", &pinned_by(&original, "drift-sentinel"));
        let fired = sim.lines().iter().any(|line| line.contains("manual_edit"));
        assert_eq!(fired, fires, "remediation on: {on}: {:?}", sim.lines());
    }
}
