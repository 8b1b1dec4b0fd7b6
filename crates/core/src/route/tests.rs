//! The router's tests: matching, grouping, silences, endpoints and ids.

use super::*;
use drift_model::{Evidence, OwnerChain};

pub(super) fn drift(class: &str, severity: Severity, namespace: &str) -> Drift {
    Drift {
        id: format!("{class}-{namespace}"),
        class: class.into(),
        rule: None,
        severity,
        state: DriftState::Firing,
        cluster: "prod".into(),
        uid: "u".into(),
        api_version: "serving.knative.dev/v1".into(),
        kind: "Service".into(),
        namespace: namespace.into(),
        name: "web".into(),
        labels: [("team".to_string(), "payments".to_string())]
            .into_iter()
            .collect(),
        owner: OwnerChain::default(),
        evidence: Evidence::default(),
        since: 0,
        fire_at: 0,
        fired_at: Some(0),
        resolved_at: None,
        resolution: None,
    }
}

fn transition(drift: Drift, from: DriftState) -> Transition {
    Transition {
        drift,
        from: Some(from),
        at: 1_000,
    }
}

fn config(yaml: &str) -> crate::config::Config {
    crate::config::load_str(yaml, &|_| None).unwrap()
}

#[test]
fn a_broken_own_event_path_reaches_every_channel_whatever_the_routes_say() {
    let config = config(concat!(
        "channels:\n  - {name: pager, type: log}\n  - {name: chat, type: log}\n",
        "routes:\n  - {match: {namespace: ['pay*']}, channels: [pager]}\n",
    ));
    let router = config.router();
    let rules = Rules::default();
    let broken = router.route(
        &transition(
            drift(
                crate::classify::classes::PIPELINE_BROKEN,
                Severity::Critical,
                "drift-sentinel",
            ),
            DriftState::Pending,
        ),
        &rules,
        &Silences::default(),
        1_000,
    );
    let names: Vec<&str> = broken.iter().map(|q| q.channel.as_str()).collect();
    assert_eq!(names, ["pager", "chat"]);
    // Any other class in that namespace matches no route and goes nowhere.
    let other = router.route(
        &transition(
            drift("not_ready", Severity::Critical, "drift-sentinel"),
            DriftState::Pending,
        ),
        &rules,
        &Silences::default(),
        1_000,
    );
    assert!(other.is_empty());
}

#[test]
fn first_matching_route_wins_unless_continue() {
    let config = config(
        concat!(
            "channels:\n  - {name: pager, type: log}\n  - {name: chat, type: log}\n  - {name: audit, type: log}\n",
            "routes:\n  - {match: {severity: critical}, channels: [pager], continue: true, groupWait: 0s}\n",
            "  - {match: {namespace: ['pay*'], labels: {team: payments}}, channels: [chat]}\n",
            "  - {channels: [audit]}\n",
        ),
    );
    let router = config.router();
    let rules = Rules::default();
    let critical = router.route(
        &transition(
            drift("traffic_drift", Severity::Critical, "payments"),
            DriftState::Pending,
        ),
        &rules,
        &Silences::default(),
        1_000,
    );
    let names: Vec<&str> = critical.iter().map(|q| q.channel.as_str()).collect();
    assert_eq!(names, ["pager", "chat"]);
    assert_eq!(critical[0].not_before, 1_000);
    assert_eq!(critical[1].not_before, 11_000, "default groupWait 10s");
    let warning = router.route(
        &transition(
            drift("manual_edit", Severity::Warning, "other"),
            DriftState::Pending,
        ),
        &rules,
        &Silences::default(),
        1_000,
    );
    assert_eq!(
        warning
            .iter()
            .map(|q| q.channel.as_str())
            .collect::<Vec<_>>(),
        ["audit"]
    );
}

#[test]
fn resolves_follow_send_resolved_except_for_alertmanager() {
    let config = config(
        concat!(
            "channels:\n  - {name: chat, type: log}\n  - {name: am, type: alertmanager, urls: ['http://a:9093', 'http://b:9093']}\n",
            "routes:\n  - {channels: [chat, am], sendResolved: false}\n",
        ),
    );
    let router = config.router();
    let mut resolved = drift("not_ready", Severity::Critical, "ns");
    resolved.state = DriftState::Resolved;
    let queued = router.route(
        &transition(resolved, DriftState::Firing),
        &Rules::default(),
        &Silences::default(),
        5_000,
    );
    let names: Vec<&str> = queued.iter().map(|q| q.channel.as_str()).collect();
    assert_eq!(names, ["am#0", "am#1"]);
    assert_eq!(queued[0].notice.kind, NoticeKind::Resolved);
}

#[test]
fn silenced_and_pending_transitions_queue_nothing() {
    let config = config("channels:\n  - {name: chat, type: log}\nrules:\n  silences:\n    - matchers: {namespace: 'sandbox-*'}\n");
    let router = config.router();
    let rules = config.rules.compile();
    assert!(router
        .route(
            &transition(
                drift("not_ready", Severity::Critical, "sandbox-1"),
                DriftState::Pending
            ),
            &rules,
            &Silences::default(),
            0
        )
        .is_empty());
    let mut pending = transition(
        drift("not_ready", Severity::Critical, "prod"),
        DriftState::Pending,
    );
    pending.drift.state = DriftState::Pending;
    pending.from = None;
    assert!(router
        .route(&pending, &rules, &Silences::default(), 0)
        .is_empty());
    assert_eq!(
        router
            .route(
                &transition(
                    drift("not_ready", Severity::Critical, "prod"),
                    DriftState::Pending
                ),
                &rules,
                &Silences::default(),
                0
            )
            .len(),
        1
    );
}

/// A firing warning that turns critical (a certificate crossing `criticalBefore`) reaches
/// the pager route that takes critical drifts only, as a firing notice at the new severity;
/// the chat route that took the warning hears it again.
#[test]
fn an_escalation_is_sent_where_its_new_severity_goes() {
    let config = config(concat!(
        "channels:\n  - {name: pager, type: log}\n  - {name: chat, type: log}\n",
        "routes:\n  - {match: {severity: critical}, channels: [pager], continue: true}\n",
        "  - {channels: [chat]}\n",
    ));
    let router = config.router();
    let rules = Rules::default();
    let mut warning = drift("certificate_expiring", Severity::Warning, "prod");
    // It fired at its transition, as the engine fires (at 1_000, `transition`'s time).
    warning.fired_at = Some(1_000);
    let fired = router.route(
        &transition(warning.clone(), DriftState::Pending),
        &rules,
        &Silences::default(),
        1_000,
    );
    let names: Vec<&str> = fired.iter().map(|q| q.channel.as_str()).collect();
    assert_eq!(names, ["chat"]);
    let mut critical = warning;
    critical.severity = Severity::Critical;
    let escalation = Transition {
        drift: critical,
        from: Some(DriftState::Firing),
        at: 5_000,
    };
    assert!(escalation.is_escalation());
    let queued = router.route(&escalation, &rules, &Silences::default(), 5_000);
    let names: Vec<&str> = queued.iter().map(|q| q.channel.as_str()).collect();
    assert_eq!(names, ["pager", "chat"]);
    assert!(queued.iter().all(|q| q.notice.kind == NoticeKind::Firing
        && q.notice.drift.severity == Severity::Critical
        && q.notice.is_escalation()));
    // Its own reminders, at the new severity (the relay ends the older ones).
    assert!(queued.iter().all(|q| q.repeat_after.is_some()));
    // A first fire is no escalation.
    assert!(!fired[0].notice.is_escalation());
}

#[test]
fn group_interval_is_the_routes_or_a_minute_and_never_paces_alertmanager() {
    let config = config(concat!(
        "channels:\n  - {name: chat, type: log}\n  - {name: fast, type: log}\n",
        "  - {name: am, type: alertmanager, urls: ['http://a:9093']}\n",
        "routes:\n  - {match: {namespace: [now]}, channels: [fast], groupInterval: 0s}\n",
        "  - {match: {namespace: [slow]}, channels: [chat], groupInterval: 5m}\n",
        "  - {channels: [chat, am]}\n",
    ));
    let router = config.router();
    // What a warning `manual_edit` in `namespace` is queued as, by `router`.
    let queued_for = |router: &Router, namespace: &str| -> Vec<Queued> {
        router.route(
            &transition(
                drift("manual_edit", Severity::Warning, namespace),
                DriftState::Pending,
            ),
            &Rules::default(),
            &Silences::default(),
            1_000,
        )
    };
    let intervals = |namespace: &str| -> Vec<(String, Duration)> {
        queued_for(&router, namespace)
            .into_iter()
            .map(|queued| (queued.channel, queued.group_interval))
            .collect()
    };
    assert_eq!(intervals("now"), [("fast".to_string(), Duration::ZERO)]);
    assert_eq!(
        intervals("slow"),
        [("chat".to_string(), Duration::from_secs(300))]
    );
    assert_eq!(
        intervals("other"),
        [
            ("chat".to_string(), DEFAULT_GROUP_INTERVAL),
            ("am".to_string(), Duration::ZERO)
        ]
    );
    // The route of no routes paces as a route that names no interval does.
    let plain = crate::config::router(&[], &[crate::config::ChannelConfig::log("log")]);
    let queued = queued_for(&plain, "shop");
    assert_eq!(queued[0].group_interval, DEFAULT_GROUP_INTERVAL);
    assert_eq!(queued[0].route, 0, "the route of no routes, after none");
    // Each notification names its route, so routes that share an endpoint are paced apart.
    let routes_of = |namespace: &str| -> Vec<usize> {
        queued_for(&router, namespace)
            .into_iter()
            .map(|queued| queued.route)
            .collect()
    };
    assert_eq!(routes_of("now"), [0]);
    assert_eq!(routes_of("slow"), [1]);
    assert_eq!(routes_of("other"), [2, 2]);
}
