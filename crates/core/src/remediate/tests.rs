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
    ledger.record("prod", "a", &[], 0);
    assert!(ledger.within_budget(budget, MINUTE));
    ledger.record("prod", "b", &[], MINUTE);
    assert!(!ledger.within_budget(budget, 2 * MINUTE));
    // The first action leaves the window an hour after it was taken.
    assert!(!ledger.within_budget(budget, 60 * MINUTE - 1));
    assert!(ledger.within_budget(budget, 60 * MINUTE));
}

#[test]
fn the_cooldown_is_per_object() {
    let mut ledger = Ledger::default();
    ledger.record("prod", "a", &[], 10 * MINUTE);
    let cooldown = Duration::from_secs(600);
    assert_eq!(
        ledger.cooldown_until("prod", "a", cooldown),
        Some(20 * MINUTE)
    );
    assert_eq!(ledger.cooldown_until("prod", "b", cooldown), None);
    assert_eq!(ledger.cooldown_until("staging", "a", cooldown), None);
}

fn traffic() -> Vec<String> {
    vec!["/spec/traffic/0/percent".to_string()]
}

#[test]
fn a_fight_is_the_same_manager_setting_the_reverted_fields_back_after_each_revert() {
    let fight = Fight {
        times: 3,
        within: Duration::from_secs(3600),
    };
    let mut ledger = Ledger::default();
    // A set-back on an object never reverted is an ordinary edit.
    assert_eq!(
        ledger.set_back("prod", "a", "kubectl-edit", &traffic(), fight, 0),
        None
    );
    // Acted on without a revert (a restore, a rollback): no fight either.
    ledger.record("prod", "a", &[], MINUTE);
    assert_eq!(
        ledger.set_back("prod", "a", "kubectl-edit", &traffic(), fight, 2 * MINUTE),
        None
    );
    let mut minute = 3;
    let mut round = |ledger: &mut Ledger, manager: &str, fields: &[String]| {
        ledger.record("prod", "a", &traffic(), minute * MINUTE);
        let started = ledger.set_back("prod", "a", manager, fields, fight, minute * MINUTE + 1);
        minute += 1;
        started
    };
    assert_eq!(round(&mut ledger, "kubectl-edit", &traffic()), None);
    // Other fields, or another manager, do not count for this fight.
    assert_eq!(
        round(&mut ledger, "kubectl-edit", &["/spec/template".to_string()]),
        None
    );
    assert_eq!(round(&mut ledger, "kn", &traffic()), None);
    assert_eq!(round(&mut ledger, "kubectl-edit", &traffic()), None);
    // Two edits after one revert are one round.
    assert_eq!(
        ledger.set_back("prod", "a", "kubectl-edit", &traffic(), fight, 30 * MINUTE),
        None
    );
    assert_eq!(ledger.fighting("prod", "a"), None);
    assert_eq!(
        round(&mut ledger, "kubectl-edit", &traffic()),
        Some(FightStarted {
            manager: "kubectl-edit".to_string(),
            times: 3
        })
    );
    assert_eq!(ledger.fighting("prod", "a"), Some("kubectl-edit"));
    // Once stopped, no second fight is opened for it.
    assert_eq!(round(&mut ledger, "kubectl-edit", &traffic()), None);
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
    ledger.record("prod", "a", &traffic(), 0);
    assert_eq!(
        ledger.set_back("prod", "a", "kubectl-edit", &traffic(), fight, MINUTE),
        None
    );
    ledger.record("prod", "a", &traffic(), 20 * MINUTE);
    // The first set-back is 20 minutes old: outside the 10-minute window.
    assert_eq!(
        ledger.set_back("prod", "a", "kubectl-edit", &traffic(), fight, 21 * MINUTE),
        None
    );
    ledger.record("prod", "a", &traffic(), 22 * MINUTE);
    assert!(ledger
        .set_back("prod", "a", "kubectl-edit", &traffic(), fight, 23 * MINUTE)
        .is_some());
}

#[test]
fn prune_forgets_what_no_rail_reads_and_keeps_a_stopped_object_stopped() {
    let fight = Fight {
        times: 2,
        within: Duration::from_secs(3600),
    };
    let mut ledger = Ledger::default();
    for minute in [0, 2] {
        ledger.record("prod", "a", &traffic(), minute * MINUTE);
        ledger.set_back("prod", "a", "kn", &traffic(), fight, (minute + 1) * MINUTE);
    }
    ledger.record("prod", "b", &[], 0);
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
