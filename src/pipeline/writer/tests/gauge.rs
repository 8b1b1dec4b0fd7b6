//! The firing gauge (`drift_sentinel_drifts_firing`) follows every change of a drift, as a
//! count of every open drift would show it.

use super::*;
use drift_model::DriftState;

/// The firing gauge's non-zero series, as `/metrics` shows them: `severity count`.
fn firing_gauge(h: &Harness) -> Vec<String> {
    let mut series: Vec<String> = (h.writer.metrics.render().lines())
        .filter(|line| line.starts_with("drift_sentinel_drifts_firing{") && !line.ends_with(" 0"))
        .filter_map(|line| {
            let severity = line.split("severity=\"").nth(1)?.split('"').next()?;
            Some(format!("{severity} {}", line.rsplit(' ').next()?))
        })
        .collect();
    series.sort();
    series
}

/// Every series of the firing gauge, as `/metrics` shows it: `class severity namespace count`
/// (series set to 0 included).
fn firing_series(h: &Harness) -> Vec<String> {
    let label = |line: &str, name: &str| -> String {
        let start = format!("{name}=\"");
        (line.split(start.as_str()).nth(1))
            .and_then(|rest| rest.split('"').next())
            .unwrap_or("?")
            .to_string()
    };
    let mut series: Vec<String> = (h.writer.metrics.render().lines())
        .filter(|line| line.starts_with("drift_sentinel_drifts_firing{"))
        .map(|line| {
            let count = line.rsplit(' ').next().unwrap_or("?");
            let labels = ["class", "severity", "namespace"].map(|name| label(line, name));
            format!("{} {count}", labels.join(" "))
        })
        .collect();
    series.sort();
    series
}

/// What the gauge must show: the engine's open drifts that fire, counted by class, severity and
/// namespace.
fn counted_from_the_engine(h: &Harness) -> Vec<String> {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for drift in h.writer.engine.open_drifts() {
        if drift.state == DriftState::Firing {
            let key = format!(
                "{} {} {}",
                drift.class,
                drift.severity.as_str(),
                drift.namespace
            );
            *counts.entry(key).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .map(|(key, count)| format!("{key} {count}"))
        .collect()
}

/// The firing gauge is counted only after a round that changed a drift or was rolled back, and
/// follows every change: firing on the clock, escalation, a rolled-back resolve (at once).
#[test]
fn the_firing_gauge_follows_every_change_of_a_drift() {
    let (mut h, day) = (harness(), 86_400_000);
    let not_after = START + 20 * day;
    h.round(vec![certificate_event("c-1", "100", not_after)]);
    assert!(firing_gauge(&h).is_empty());
    h.advance(Duration::from_secs(6 * 86_400 + 3600));
    h.round(Vec::new());
    assert_eq!(firing_gauge(&h), ["warning 1"]);
    // Not counted after a round that changed no drift: series cleared behind its back stay so.
    h.writer.metrics.drifts_firing.clear();
    h.round(vec![service_event("s-1", "100", "gcr.io/app:1")]);
    assert!(firing_gauge(&h).is_empty());
    h.advance(Duration::from_secs(12 * 86_400));
    h.round(Vec::new());
    assert_eq!(firing_gauge(&h), ["critical 1"]);
    // The renewal's round fails: the resolve is taken back, and so is its count, at once.
    h.store.set_failing(true);
    h.round(vec![certificate_event("c-2", "101", not_after + 90 * day)]);
    assert_eq!(firing_gauge(&h), ["critical 1"]);
    h.store.set_failing(false);
    h.advance(Duration::from_secs(2));
    h.round(vec![certificate_event("c-2", "101", not_after + 90 * day)]);
    assert!(firing_gauge(&h).is_empty());
}

/// The gauge follows only the drifts each round changed; after every round of a long,
/// seeded run (certificates in three namespaces renewed, let lapse, deleted; rounds that fail;
/// rules reloads that disable `certificate_expiring`, retiring its firing drifts, and enable
/// it again; restarts from the store, a new writer with the engine restored, in a new registry
/// or the same one cleared) it shows exactly what counting every open drift shows: each series
/// that fires with its count, and a series that stopped firing at 0.
#[test]
fn the_firing_gauge_matches_a_count_of_every_open_drift_after_every_round() {
    const DAY: i64 = 86_400_000;
    let rules = |enabled: bool| {
        let config: drift_core::config::RulesConfig = serde_json::from_value(serde_json::json!({
            "classes": {"certificate_expiring": {"enabled": enabled}}
        }))
        .expect("rules");
        Arc::new(config.compile())
    };
    let mut h = harness();
    let mut seed: u64 = 0x5eed_6a5e;
    let mut next = move |below: u64| -> u64 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) % below
    };
    let mut version = 100;
    let (mut reloads, mut restarts, mut enabled) = (0, 0, true);
    let (mut retired_firing, mut restarted_firing) = (0, 0);
    let mut ever_fired: std::collections::BTreeSet<String> = Default::default();
    for round in 0..400 {
        if next(12) == 0 {
            enabled = !enabled;
            if !enabled && !counted_from_the_engine(&h).is_empty() {
                retired_firing += 1;
            }
            h.writer.set_rules(rules(enabled));
            reloads += 1;
        }
        if next(20) == 0 {
            if !counted_from_the_engine(&h).is_empty() {
                restarted_firing += 1;
            }
            restart(&mut h, rules(enabled), restarts % 2 == 0);
            restarts += 1;
        }
        let mut requests = Vec::new();
        for _ in 0..next(4) {
            let (cert, namespace) = (next(8), ["ns-a", "ns-b", "ns-c"][next(3) as usize]);
            // Expires in 0–30 days (warning within 14, critical within 3) or is renewed.
            let not_after = (h.now.load(Ordering::SeqCst))
                .saturating_add(i64::try_from(next(31)).unwrap() * DAY)
                .saturating_add(if next(4) == 0 { 365 * DAY } else { 0 });
            version += 1;
            let deleted = next(12) == 0;
            requests.push(certificate_event_with(
                &format!("e-{round}-{version}"),
                &version.to_string(),
                not_after,
                |event| {
                    let metadata = &mut event["data"]["metadata"];
                    metadata["name"] = serde_json::json!(format!("cert-{cert}"));
                    metadata["uid"] = serde_json::json!(format!("uid-{cert}"));
                    metadata["namespace"] = serde_json::json!(namespace);
                    if deleted {
                        event["type"] = serde_json::json!("dev.knative.apiserver.resource.delete");
                    }
                },
            ));
        }
        let failing = next(8) == 0;
        h.store.set_failing(failing);
        h.round(requests);
        h.store.set_failing(false);
        h.advance(Duration::from_millis(next(3 * DAY as u64)));
        let expected = counted_from_the_engine(&h);
        let shown: Vec<String> = (firing_series(&h).into_iter())
            .filter(|series| !series.ends_with(" 0"))
            .collect();
        assert_eq!(
            shown, expected,
            "after round {round} (failing: {failing}, enabled: {enabled})"
        );
        ever_fired.extend(firing_series(&h));
    }
    // The run went through every state it checks: fires of both severities in every
    // namespace, series that stopped firing, reloads that retired firing drifts, restarts
    // with drifts firing.
    for namespace in ["ns-a", "ns-b", "ns-c"] {
        for severity in ["warning", "critical"] {
            let prefix = format!("certificate_expiring {severity} {namespace} ");
            assert!(
                ever_fired
                    .iter()
                    .any(|series| series.starts_with(&prefix) && !series.ends_with(" 0")),
                "{prefix}never fired: {ever_fired:?}"
            );
        }
    }
    assert!(ever_fired.iter().any(|series| series.ends_with(" 0")));
    assert!(
        reloads > 5 && restarts > 5,
        "{reloads} reloads, {restarts} restarts"
    );
    assert!(
        retired_firing > 3 && restarted_firing > 3,
        "{retired_firing} reloads retired firing drifts, {restarted_firing} restarts had some"
    );
}

/// A restart, as `Pipeline::start` does it: a new writer on the same store, its engine restored
/// from what the store holds; a new registry, or (a writer role taken again in the same
/// process) the same one with the writer's gauges cleared.
fn restart(h: &mut Harness, rules: Arc<Rules>, new_registry: bool) {
    let (store, engine) = restored(&h.store, rules);
    let clock = Arc::clone(&h.now);
    let metrics = if new_registry {
        Arc::new(Metrics::new())
    } else {
        h.writer.metrics.clear_writer_gauges();
        Arc::clone(&h.writer.metrics)
    };
    let writer = Writer::new(
        engine,
        store,
        Arc::new(move || clock.load(Ordering::SeqCst)),
        metrics,
        Arc::clone(&h.health),
        h.writer.settings.clone(),
        Silences::default(),
        crate::pipeline::fleet_view::Publisher::new(crate::pipeline::fleet_view::Shared::new(
            Vec::new(),
        )),
    );
    drop(std::mem::replace(&mut h.writer, writer));
}
