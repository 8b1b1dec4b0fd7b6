//! What a drill run found, and its report in `check`'s formats: text, Markdown, JSON and JUnit
//! (one test case per drill run). Pure: the runner fills [`Outcome`]s, [`summary`] counts them
//! per class with detection latencies, [`false_alerts`] finds drifts no drill explains, and
//! [`render`] prints. Exit code: 0 when every drill passed (and, in chaos, no false alert), 1
//! otherwise.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use super::sink::Seen;
use crate::check::render::{md_text, one_line, xml_escape};
use drift_core::drill::Target;

/// Report formats (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A line per drill, then the summary.
    Text,
    /// A Markdown table and summary, for a pull request or a wiki.
    Markdown,
    /// The documented JSON.
    Json,
    /// JUnit XML: one test case per drill run.
    Junit,
}

/// How a drill left its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    /// Nothing was injected (the drill failed before).
    NotInjected,
    /// Put back by the drill.
    Restored,
    /// Put back by someone else (`expectRepaired`), or already as kept.
    Repaired,
    /// Left as injected (`then: keep`).
    Kept,
    /// Not put back: what to do by hand.
    NotRestored(String),
}

/// One drill run.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// The drill's name.
    pub name: String,
    /// The run's number (chaos runs a drill many times; 0 otherwise).
    pub run: usize,
    pub target: Target,
    /// The class expected (`invariant` for a rule).
    pub class: String,
    pub rule: Option<String>,
    /// `restore`, `expectRepaired` or `keep`.
    pub then: &'static str,
    /// When it injected, from the run's start; `None` when it did not.
    pub injected_at: Option<Duration>,
    /// When the drift was seen firing, after the injection.
    pub detected_after: Option<Duration>,
    /// The drift seen.
    pub drift: Option<Seen>,
    /// Whether someone else repaired it (`expectRepaired` only).
    pub repaired: Option<bool>,
    /// Whether its drift resolved after the end.
    pub resolved: Option<bool>,
    pub end: End,
    /// When it ended, from the run's start.
    pub ended_at: Duration,
    /// Why it failed (empty: passed).
    pub failures: Vec<String>,
}

impl Outcome {
    pub(crate) fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    fn expectation(&self) -> String {
        match &self.rule {
            Some(rule) => format!("invariant {rule}"),
            None => self.class.clone(),
        }
    }

    fn object(&self) -> String {
        format!(
            "{} {}/{}",
            self.target.kind, self.target.namespace, self.target.name
        )
    }

    fn end_text(&self) -> String {
        match &self.end {
            End::NotInjected => "nothing injected".into(),
            End::Restored => "restored".into(),
            End::Repaired => "repaired".into(),
            End::Kept => "kept as injected".into(),
            End::NotRestored(by_hand) => format!("NOT RESTORED: {by_hand}"),
        }
    }
}

/// Per class (or rule): how many injected, detected, missed, repaired; latencies.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ClassSummary {
    pub injected: usize,
    pub detected: usize,
    pub missed: usize,
    pub repaired: usize,
    pub p50: Option<Duration>,
    pub p99: Option<Duration>,
}

/// The summary of a run, by expectation (`manual_edit`, `invariant scale-bounds-sane`).
pub(crate) fn summary(outcomes: &[Outcome]) -> BTreeMap<String, ClassSummary> {
    let mut classes: BTreeMap<String, (ClassSummary, Vec<Duration>)> = BTreeMap::new();
    for outcome in outcomes {
        if outcome.injected_at.is_none() {
            continue;
        }
        let (class, latencies) = classes.entry(outcome.expectation()).or_default();
        class.injected += 1;
        match outcome.detected_after {
            Some(latency) => {
                class.detected += 1;
                latencies.push(latency);
            }
            None => class.missed += 1,
        }
        if outcome.repaired == Some(true) {
            class.repaired += 1;
        }
    }
    classes
        .into_iter()
        .map(|(name, (mut class, mut latencies))| {
            latencies.sort();
            class.p50 = percentile(&latencies, 50);
            class.p99 = percentile(&latencies, 99);
            (name, class)
        })
        .collect()
}

/// The nearest-rank percentile of sorted values.
fn percentile(sorted: &[Duration], percent: usize) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (percent * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

/// Drifts that fired in the drill namespaces without an injection: begun during the run, not one
/// a drill saw, and begun (`since`, the sink's time) while no drill was open in their namespace
/// (a drill is open from its injection to its end, in the runner's time from `started`, widened
/// by `slack` for the two clocks and the sink's grace). A drift a drill causes elsewhere in its
/// namespace (a deleted Service's Trigger losing its subscriber) is the drill's, not a false one.
pub(crate) fn false_alerts(
    fired: &[Seen],
    outcomes: &[Outcome],
    started: drift_model::Millis,
    slack: Duration,
) -> Vec<Seen> {
    use drift_model::time::millis;
    let at = |offset: Duration| started + millis(offset);
    let slack = millis(slack);
    fired
        .iter()
        .filter(|drift| drift.fired_at.is_some())
        .filter(|drift| {
            let seen = outcomes
                .iter()
                .any(|outcome| outcome.drift.as_ref().is_some_and(|own| own.id == drift.id));
            let since = drift_model::time::parse_time(&drift.since);
            let during_a_drill = outcomes.iter().any(|outcome| {
                let Some(injected) = outcome.injected_at else {
                    return false;
                };
                drift.namespace == outcome.target.namespace
                    && since.is_some_and(|since| {
                        since >= at(injected) - slack && since <= at(outcome.ended_at) + slack
                    })
            });
            // A drift that began before the run is not the run's (the kit's own, a team's).
            let before_run = since.is_some_and(|since| since < started);
            !seen && !during_a_drill && !before_run
        })
        .cloned()
        .collect()
}

/// A run's report.
pub(crate) struct Report<'a> {
    /// `drills` or `chaos`.
    pub mode: &'static str,
    /// The chaos run's seed.
    pub seed: Option<u64>,
    pub outcomes: &'a [Outcome],
    pub false_alerts: &'a [Seen],
    /// Arrivals a chaos run did not get to (stopped by a signal).
    pub not_run: usize,
    /// Whether a signal stopped the run.
    pub interrupted: bool,
}

impl Report<'_> {
    /// Whether the run passed: every drill, and in chaos no false alert.
    pub(crate) fn passed(&self) -> bool {
        self.outcomes.iter().all(Outcome::passed)
            && !self.interrupted
            && (self.mode != "chaos" || self.false_alerts.is_empty())
    }
}

fn millis(duration: Option<Duration>) -> Value {
    duration.map_or(Value::Null, |duration| json!(duration.as_millis() as u64))
}

fn seconds(duration: Option<Duration>) -> String {
    duration.map_or_else(
        || "-".into(),
        |duration| format!("{:.1}s", duration.as_secs_f64()),
    )
}

/// Renders the report.
pub(crate) fn render(report: &Report<'_>, format: Format) -> String {
    match format {
        Format::Text => text(report),
        Format::Markdown => markdown(report),
        Format::Json => {
            let mut text = serde_json::to_string_pretty(&as_json(report))
                .unwrap_or_else(|error| format!("{{\"error\": \"{error}\"}}"));
            text.push('\n');
            text
        }
        Format::Junit => junit(report),
    }
}

fn name_of(outcome: &Outcome, mode: &str) -> String {
    if mode == "chaos" {
        format!("{} #{}", outcome.name, outcome.run)
    } else {
        outcome.name.clone()
    }
}

fn text(report: &Report<'_>) -> String {
    let mut out = String::new();
    for outcome in report.outcomes {
        let verdict = if outcome.passed() { "PASS" } else { "FAIL" };
        out.push_str(&format!(
            "{verdict} {} ({} on {}): detected {}, {}\n",
            name_of(outcome, report.mode),
            outcome.expectation(),
            outcome.object(),
            seconds(outcome.detected_after),
            outcome.end_text()
        ));
        for failure in &outcome.failures {
            out.push_str(&format!("  - {}\n", one_line(failure)));
        }
    }
    out.push_str(&summary_text(report));
    out
}

fn summary_text(report: &Report<'_>) -> String {
    let mut out = String::new();
    for (class, summary) in summary(report.outcomes) {
        out.push_str(&format!(
            "{class}: injected {}, detected {}, missed {}, repaired {}, latency p50 {} p99 {}\n",
            summary.injected,
            summary.detected,
            summary.missed,
            summary.repaired,
            seconds(summary.p50),
            seconds(summary.p99)
        ));
    }
    for drift in report.false_alerts {
        out.push_str(&format!(
            "false alert: {} {} on {} {}/{} (drift {})\n",
            drift.severity, drift.class, drift.kind, drift.namespace, drift.name, drift.id
        ));
    }
    let passed = report
        .outcomes
        .iter()
        .filter(|outcome| outcome.passed())
        .count();
    out.push_str(&format!(
        "{} of {} drill runs passed, {} false alert(s){}{}{}\n",
        passed,
        report.outcomes.len(),
        report.false_alerts.len(),
        report
            .seed
            .map(|seed| format!(", seed {seed}"))
            .unwrap_or_default(),
        if report.not_run > 0 {
            format!(", {} not run", report.not_run)
        } else {
            String::new()
        },
        if report.interrupted {
            ", interrupted by a signal"
        } else {
            ""
        }
    ));
    out
}

fn markdown(report: &Report<'_>) -> String {
    let mut out = String::from(
        "| | drill | expected | object | detected | end |\n|---|---|---|---|---|---|\n",
    );
    for outcome in report.outcomes {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            if outcome.passed() { "✅" } else { "❌" },
            md_text(&name_of(outcome, report.mode)),
            md_text(&outcome.expectation()),
            md_text(&outcome.object()),
            seconds(outcome.detected_after),
            md_text(&outcome.end_text())
        ));
    }
    let failures: Vec<&Outcome> = report
        .outcomes
        .iter()
        .filter(|outcome| !outcome.passed())
        .collect();
    if !failures.is_empty() {
        out.push_str("\n**Failures**\n\n");
        for outcome in failures {
            for failure in &outcome.failures {
                out.push_str(&format!(
                    "- {}: {}\n",
                    md_text(&name_of(outcome, report.mode)),
                    md_text(&one_line(failure))
                ));
            }
        }
    }
    out.push('\n');
    for line in summary_text(report).lines() {
        out.push_str(&format!("{}  \n", md_text(line)));
    }
    out
}

fn as_json(report: &Report<'_>) -> Value {
    let drills: Vec<Value> = report
        .outcomes
        .iter()
        .map(|outcome| {
            let target = &outcome.target;
            json!({
                "name": outcome.name,
                "run": outcome.run,
                "target": {"apiVersion": target.api_version, "kind": target.kind,
                           "namespace": target.namespace, "name": target.name},
                "expect": {"class": outcome.class, "rule": outcome.rule},
                "then": outcome.then,
                "passed": outcome.passed(),
                "injectedAtMs": millis(outcome.injected_at),
                "detectedAfterMs": millis(outcome.detected_after),
                "drift": outcome.drift.as_ref().map(|drift| json!({
                    "id": drift.id, "class": drift.class, "rule": drift.rule,
                    "severity": drift.severity})),
                "repaired": outcome.repaired,
                "resolved": outcome.resolved,
                "end": match &outcome.end {
                    End::NotInjected => "notInjected",
                    End::Restored => "restored",
                    End::Repaired => "repaired",
                    End::Kept => "kept",
                    End::NotRestored(_) => "notRestored",
                },
                "restoreByHand": match &outcome.end {
                    End::NotRestored(by_hand) => Value::String(by_hand.clone()),
                    _ => Value::Null,
                },
                "failures": outcome.failures,
            })
        })
        .collect();
    let classes: serde_json::Map<String, Value> = summary(report.outcomes)
        .into_iter()
        .map(|(class, summary)| {
            (
                class,
                json!({"injected": summary.injected, "detected": summary.detected,
                       "missed": summary.missed, "repaired": summary.repaired,
                       "latencyP50Ms": millis(summary.p50), "latencyP99Ms": millis(summary.p99)}),
            )
        })
        .collect();
    let false_alerts: Vec<Value> = report
        .false_alerts
        .iter()
        .map(|drift| {
            json!({"id": drift.id, "class": drift.class, "rule": drift.rule,
                   "severity": drift.severity, "kind": drift.kind,
                   "namespace": drift.namespace, "name": drift.name, "since": drift.since})
        })
        .collect();
    json!({
        "command": "drill",
        "mode": report.mode,
        "seed": report.seed,
        "passed": report.passed(),
        "interrupted": report.interrupted,
        "notRun": report.not_run,
        "drills": drills,
        "summary": {"classes": classes, "falseAlerts": false_alerts},
    })
}

fn junit(report: &Report<'_>) -> String {
    let failed = report
        .outcomes
        .iter()
        .filter(|outcome| !outcome.passed())
        .count();
    let false_alert_case = report.mode == "chaos";
    let tests = report.outcomes.len() + usize::from(false_alert_case);
    let failures = failed + usize::from(false_alert_case && !report.false_alerts.is_empty());
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"drift-sentinel drill\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\">\n"
    ));
    out.push_str(&format!(
        "  <testsuite name=\"drift-sentinel drill\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"0\">\n"
    ));
    for outcome in report.outcomes {
        let time = outcome
            .ended_at
            .saturating_sub(outcome.injected_at.unwrap_or(outcome.ended_at));
        out.push_str(&format!(
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            xml_escape(&outcome.expectation()),
            xml_escape(&name_of(outcome, report.mode)),
            time.as_secs_f64()
        ));
        let out_text = format!(
            "{} on {}: detected {}, {}",
            outcome.expectation(),
            outcome.object(),
            seconds(outcome.detected_after),
            outcome.end_text()
        );
        if outcome.passed() {
            out.push_str(&format!(
                ">\n      <system-out>{}</system-out>\n    </testcase>\n",
                xml_escape(&out_text)
            ));
            continue;
        }
        out.push_str(&format!(
            ">\n      <failure type=\"drill\" message=\"{}\">{}</failure>\n      <system-out>{}</system-out>\n    </testcase>\n",
            xml_escape(&one_line(&outcome.failures.join("; "))),
            xml_escape(&outcome.failures.join("\n")),
            xml_escape(&out_text)
        ));
    }
    if false_alert_case {
        out.push_str("    <testcase classname=\"chaos\" name=\"no false alerts\" time=\"0\"");
        if report.false_alerts.is_empty() {
            out.push_str("/>\n");
        } else {
            let lines: Vec<String> = report
                .false_alerts
                .iter()
                .map(|drift| {
                    format!(
                        "{} {} on {} {}/{} (drift {})",
                        drift.severity,
                        drift.class,
                        drift.kind,
                        drift.namespace,
                        drift.name,
                        drift.id
                    )
                })
                .collect();
            out.push_str(&format!(
                ">\n      <failure type=\"false_alert\" message=\"{} drift(s) fired without an injection\">{}</failure>\n    </testcase>\n",
                lines.len(),
                xml_escape(&lines.join("\n"))
            ));
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(kind: &str, name: &str) -> Target {
        Target {
            api_version: if kind == "Service" {
                "serving.knative.dev/v1".into()
            } else {
                "apps/v1".into()
            },
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
            api_version: "serving.knative.dev/v1".into(),
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
            run,
            target: target("Service", "hello"),
            class: "manual_edit".into(),
            rule: None,
            then: "restore",
            injected_at: Some(Duration::from_secs(10)),
            detected_after: detected.map(Duration::from_millis),
            drift: detected
                .map(|_| seen("d-own", "Service", "hello", "2026-12-05T10:00:10Z", None)),
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
    fn a_drift_while_no_drill_was_open_is_a_false_alert() {
        let started = drift_model::time::parse_time("2026-12-05T10:00:00Z").unwrap();
        let outcomes = vec![outcome("traffic", 1, Some(900), &[])];
        let mut elsewhere = seen(
            "d-elsewhere",
            "Service",
            "other",
            "2026-12-05T10:00:12Z",
            None,
        );
        elsewhere.namespace = "team".into();
        let fired = vec![
            // The drill's own drift, and drifts it caused in its namespace during it (its
            // Service's Route, a Trigger that subscribed to it): the drill's.
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
            // After the drill (beyond the slack), in another namespace, before the run.
            seen("d-later", "Service", "hello", "2026-12-05T10:05:00Z", None),
            elsewhere,
            seen("d-before", "Service", "other", "2026-12-05T09:59:59Z", None),
        ];
        let alerts = false_alerts(&fired, &outcomes, started, Duration::from_secs(5));
        let ids: Vec<&str> = alerts.iter().map(|alert| alert.id.as_str()).collect();
        assert_eq!(ids, ["d-later", "d-elsewhere"]);
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
            false_alerts: &[],
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
            false_alerts: std::slice::from_ref(&alert),
            not_run: 0,
            interrupted: false,
        };
        assert!(!chaos.passed());
        let junit = render(&chaos, Format::Junit);
        assert!(junit.contains("name=\"traffic #0\""), "{junit}");
        assert!(junit.contains("<failure type=\"false_alert\""), "{junit}");
        assert!(render(&chaos, Format::Text).contains("seed 7"));
    }
}
