//! The report's counts, false alerts and formats.

use super::*;

/// The apiVersion of the kinds these tests use.
fn api_version(kind: &str) -> String {
    match kind {
        "Service" | "Route" => "serving.knative.dev/v1",
        "Trigger" => "eventing.knative.dev/v1",
        _ => "apps/v1",
    }
    .to_string()
}

fn target(kind: &str, name: &str) -> Target {
    Target {
        api_version: api_version(kind),
        kind: kind.into(),
        namespace: "drills".into(),
        name: name.into(),
    }
}

fn seen(id: &str, kind: &str, name: &str, since: &str, service: Option<&str>) -> Seen {
    Seen {
        id: id.into(),
        class: "manual_edit".into(),
        rule: None,
        severity: "warning".into(),
        state: "firing".into(),
        cluster: "c".into(),
        api_version: api_version(kind),
        kind: kind.into(),
        namespace: "drills".into(),
        name: name.into(),
        service: service.map(str::to_string),
        since: since.into(),
        fired_at: Some(since.into()),
    }
}

fn outcome(name: &str, run: usize, detected: Option<u64>, failures: &[&str]) -> Outcome {
    Outcome {
        name: name.into(),
        affects: Vec::new(),
        run,
        target: target("Service", "hello"),
        class: "manual_edit".into(),
        rule: None,
        then: "restore",
        injected_at: Some(Duration::from_secs(10)),
        detected_after: detected.map(Duration::from_millis),
        drift: detected.map(|_| seen("d-own", "Service", "hello", "2026-12-05T10:00:10Z", None)),
        repaired: None,
        resolved: Some(true),
        end: End::Restored,
        ended_at: Duration::from_secs(20),
        failures: failures.iter().map(|text| text.to_string()).collect(),
    }
}

#[test]
fn the_summary_counts_per_class_with_nearest_rank_percentiles() {
    let mut outcomes: Vec<Outcome> = (1..=100)
        .map(|ms| outcome("traffic", ms as usize, Some(ms * 10), &[]))
        .collect();
    outcomes.push(outcome(
        "traffic",
        101,
        None,
        &["no manual_edit drift fired"],
    ));
    let mut not_injected = outcome("traffic", 102, None, &["reading it: 403"]);
    not_injected.injected_at = None;
    outcomes.push(not_injected);
    let summary = summary(&outcomes);
    let class = &summary["manual_edit"];
    assert_eq!(
        (class.injected, class.detected, class.missed),
        (101, 100, 1)
    );
    assert_eq!(class.p50, Some(Duration::from_millis(500)));
    assert_eq!(class.p99, Some(Duration::from_millis(990)));
    assert_eq!(percentile(&[], 50), None);
    assert_eq!(
        percentile(&[Duration::from_secs(3)], 99),
        Some(Duration::from_secs(3))
    );
}

#[test]
fn a_drift_no_drill_explains_is_a_false_alert_however_close_in_time() {
    let started = drift_model::time::parse_time("2026-12-05T10:00:00Z").unwrap();
    // Open from 10:00:10 to 10:00:20, and it says it disturbs Trigger hello.
    let mut drill = outcome("service-deleted", 1, Some(900), &[]);
    drill.affects = vec![target("Trigger", "hello")];
    let outcomes = vec![drill];
    let fired = vec![
        // The drill's own drift, and what it disturbed during it: its Service's Route, the
        // Trigger it names.
        seen("d-own", "Service", "hello", "2026-12-05T10:00:10Z", None),
        seen(
            "d-route",
            "Route",
            "hello",
            "2026-12-05T10:00:12Z",
            Some("hello"),
        ),
        seen(
            "d-trigger",
            "Trigger",
            "hello",
            "2026-12-05T10:00:19Z",
            None,
        ),
        // During the drill, but on an object it does not touch; on its object after it (beyond
        // the slack); before the run: none the drill's.
        seen(
            "d-unrelated",
            "Service",
            "other",
            "2026-12-05T10:00:12Z",
            None,
        ),
        seen("d-later", "Service", "hello", "2026-12-05T10:05:00Z", None),
        seen("d-before", "Service", "other", "2026-12-05T09:59:59Z", None),
    ];
    // A namesake of another API group is another object.
    let mut namesake = seen(
        "d-namesake",
        "Service",
        "hello",
        "2026-12-05T10:00:12Z",
        None,
    );
    namesake.api_version = "v1".into();
    let fired: Vec<Seen> = fired.into_iter().chain([namesake]).collect();
    let alerts = false_alerts(&fired, &outcomes, started, Duration::from_secs(5));
    let ids: Vec<&str> = alerts.iter().map(|alert| alert.id.as_str()).collect();
    assert_eq!(ids, ["d-unrelated", "d-later", "d-namesake"]);
    // Pending ones never alerted anyone.
    let mut pending = seen(
        "d-pending",
        "Service",
        "other",
        "2026-12-05T10:00:12Z",
        None,
    );
    pending.fired_at = None;
    assert!(false_alerts(&[pending], &outcomes, started, Duration::ZERO).is_empty());
}

#[test]
fn every_format_says_which_drill_failed_and_why() {
    let outcomes = vec![
        outcome("traffic", 0, Some(1200), &[]),
        outcome(
            "label <&\"'>",
            0,
            None,
            &["no manual_edit drift fired on Service drills/hello within 60s"],
        ),
    ];
    let report = Report {
        mode: "drills",
        seed: None,
        outcomes: &outcomes,
        false_alerts: Ok(&[]),
        not_run: 0,
        interrupted: false,
    };
    assert!(!report.passed());
    let text = render(&report, Format::Text);
    assert!(
        text.contains("PASS traffic") && text.contains("FAIL label"),
        "{text}"
    );
    assert!(text.contains("1 of 2 drill runs passed"), "{text}");
    let json: Value = serde_json::from_str(&render(&report, Format::Json)).unwrap();
    assert_eq!(json["passed"], false);
    assert_eq!(json["drills"][0]["detectedAfterMs"], 1200);
    assert_eq!(
        json["drills"][1]["failures"][0],
        "no manual_edit drift fired on Service drills/hello within 60s"
    );
    let junit = render(&report, Format::Junit);
    assert!(junit.contains("tests=\"2\" failures=\"1\""), "{junit}");
    assert!(
        junit.contains("name=\"label &lt;&amp;&quot;&apos;&gt;\""),
        "{junit}"
    );
    assert!(
        junit.contains("<failure type=\"drill\" message=\"no manual_edit drift fired"),
        "{junit}"
    );
    let markdown = render(&report, Format::Markdown);
    assert!(
        markdown.contains("| ❌ | label &lt;&\"'&gt; |"),
        "{markdown}"
    );
    // Chaos adds a test case for false alerts, failed when there is one.
    let alert = seen("d-x", "Service", "other", "2026-12-05T10:00:12Z", None);
    let chaos = Report {
        mode: "chaos",
        seed: Some(7),
        outcomes: &outcomes[..1],
        false_alerts: Ok(std::slice::from_ref(&alert)),
        not_run: 0,
        interrupted: false,
    };
    assert!(!chaos.passed());
    let junit = render(&chaos, Format::Junit);
    assert!(junit.contains("name=\"traffic #0\""), "{junit}");
    assert!(junit.contains("<failure type=\"false_alert\""), "{junit}");
    assert!(render(&chaos, Format::Text).contains("seed 7"));
}
