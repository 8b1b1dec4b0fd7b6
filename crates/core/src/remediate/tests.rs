//! The rails' memory and the request helpers on their own; the planner on real objects and real
//! findings is `tests/it/remediation.rs`.

use std::time::Duration;

use super::ledger::FightStarted;
use super::plan::resource_path;
use super::*;

const MINUTE: i64 = 60_000;

#[test]
fn the_budget_counts_actions_in_a_sliding_window() {
    let budget = Budget {
        actions: 2,
        per: Duration::from_secs(3600),
    };
    let mut ledger = Ledger::default();
    assert!(ledger.within_budget(budget, 0));
    ledger.record("prod", "a", 0);
    assert!(ledger.within_budget(budget, MINUTE));
    ledger.record("prod", "b", MINUTE);
    assert!(!ledger.within_budget(budget, 2 * MINUTE));
    // The first action leaves the window an hour after it was taken.
    assert!(!ledger.within_budget(budget, 60 * MINUTE - 1));
    assert!(ledger.within_budget(budget, 60 * MINUTE));
}

#[test]
fn the_cooldown_is_per_object() {
    let mut ledger = Ledger::default();
    ledger.record("prod", "a", 10 * MINUTE);
    let cooldown = Duration::from_secs(600);
    assert_eq!(
        ledger.cooldown_until("prod", "a", cooldown),
        Some(20 * MINUTE)
    );
    assert_eq!(ledger.cooldown_until("prod", "b", cooldown), None);
    assert_eq!(ledger.cooldown_until("staging", "a", cooldown), None);
}

#[test]
fn a_fight_is_the_same_manager_setting_back_a_reverted_object_often_enough() {
    let fight = Fight {
        times: 3,
        within: Duration::from_secs(3600),
    };
    let mut ledger = Ledger::default();
    // A set-back on an object never acted on is an ordinary edit.
    assert_eq!(ledger.set_back("prod", "a", "kubectl-edit", fight, 0), None);
    ledger.record("prod", "a", MINUTE);
    assert_eq!(
        ledger.set_back("prod", "a", "kubectl-edit", fight, 2 * MINUTE),
        None
    );
    // Another manager's set-back does not count for the first one.
    assert_eq!(ledger.set_back("prod", "a", "kn", fight, 3 * MINUTE), None);
    assert_eq!(
        ledger.set_back("prod", "a", "kubectl-edit", fight, 4 * MINUTE),
        None
    );
    assert_eq!(ledger.fighting("prod", "a"), None);
    assert_eq!(
        ledger.set_back("prod", "a", "kubectl-edit", fight, 5 * MINUTE),
        Some(FightStarted {
            manager: "kubectl-edit".to_string(),
            times: 3
        })
    );
    assert_eq!(ledger.fighting("prod", "a"), Some("kubectl-edit"));
    // Once stopped, no second fight is opened for it.
    assert_eq!(
        ledger.set_back("prod", "a", "kubectl-edit", fight, 6 * MINUTE),
        None
    );
    ledger.release("prod", "a");
    assert_eq!(ledger.fighting("prod", "a"), None);
}

#[test]
fn set_backs_older_than_the_window_do_not_add_up_to_a_fight() {
    let fight = Fight {
        times: 2,
        within: Duration::from_secs(600),
    };
    let mut ledger = Ledger::default();
    ledger.record("prod", "a", 0);
    assert_eq!(
        ledger.set_back("prod", "a", "kubectl-edit", fight, MINUTE),
        None
    );
    ledger.record("prod", "a", 20 * MINUTE);
    // The first set-back is 20 minutes old: outside the 10-minute window.
    assert_eq!(
        ledger.set_back("prod", "a", "kubectl-edit", fight, 21 * MINUTE),
        None
    );
    assert!(ledger
        .set_back("prod", "a", "kubectl-edit", fight, 22 * MINUTE)
        .is_some());
}

#[test]
fn prune_forgets_what_no_rail_reads_and_keeps_a_stopped_object_stopped() {
    let fight = Fight {
        times: 2,
        within: Duration::from_secs(3600),
    };
    let mut ledger = Ledger::default();
    ledger.record("prod", "a", 0);
    ledger.set_back("prod", "a", "kn", fight, MINUTE);
    ledger.set_back("prod", "a", "kn", fight, 2 * MINUTE);
    ledger.record("prod", "b", 0);
    assert_eq!(ledger.fighting("prod", "a"), Some("kn"));
    ledger.prune(Duration::from_secs(3600), 10 * 60 * MINUTE);
    assert_eq!(ledger.cooldown_until("prod", "b", Duration::ZERO), None);
    assert!(ledger.within_budget(
        Budget {
            actions: 1,
            per: Duration::from_secs(3600)
        },
        10 * 60 * MINUTE
    ));
    assert_eq!(ledger.fighting("prod", "a"), Some("kn"));
    assert_eq!(ledger.len(), 1);
}

#[test]
fn paths_name_the_resource_and_escape_what_a_segment_cannot_hold() {
    assert_eq!(
        resource_path("serving.knative.dev/v1", "Service", "web", Some("hello")),
        "/apis/serving.knative.dev/v1/namespaces/web/services/hello"
    );
    assert_eq!(
        resource_path(
            "v1",
            "ConfigMap",
            "knative-serving",
            Some("config-autoscaler")
        ),
        "/api/v1/namespaces/knative-serving/configmaps/config-autoscaler"
    );
    assert_eq!(
        resource_path("eventing.knative.dev/v1alpha1", "EventPolicy", "ns", None),
        "/apis/eventing.knative.dev/v1alpha1/namespaces/ns/eventpolicies"
    );
    assert_eq!(
        resource_path(
            "networking.internal.knative.dev/v1alpha1",
            "ClusterDomainClaim",
            "",
            Some("a.b")
        ),
        "/apis/networking.internal.knative.dev/v1alpha1/clusterdomainclaims/a.b"
    );
    assert_eq!(
        resource_path("v1", "ConfigMap", "ns", Some("a/b?c")),
        "/api/v1/namespaces/ns/configmaps/a%2Fb%3Fc"
    );
}

#[test]
fn each_class_has_at_most_one_action_and_every_named_class_exists() {
    for action in Action::ALL {
        assert_eq!(Action::parse(action.as_str()), Some(action));
        for class in action.classes() {
            assert!(crate::classify::classes::is_known(class), "{class}");
            assert_eq!(Action::for_class(class), Some(action));
        }
    }
    assert_eq!(Action::for_class("generation_lag"), None);
    assert_eq!(Action::parse("Revert"), None);
}
