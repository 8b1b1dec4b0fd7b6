//! What a drill run found, and its report in `check`'s formats: text, Markdown, JSON and JUnit
//! (one test case per drill run). Pure: the runner fills [`Outcome`]s, [`summary`] counts them
//! per class with detection latencies, [`false_alerts`] finds drifts no drill explains, and
//! [`render`] prints. Exit code: 0 when every drill passed (and, in chaos, no false alert), 1
//! otherwise.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use super::sink::Seen;
// `check`'s formats (`--format`): a line per drill then the summary, a Markdown table and
// summary, the documented JSON, JUnit XML with one test case per drill run.
pub use crate::check::render::Format;
use crate::check::render::{md_text, one_line, xml_escape};
use drift_core::drill::Target;

/// How a drill left its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    /// Nothing was injected (the drill failed before).
    NotInjected,
    /// Put back by the drill.
    Restored,
    /// Put back by someone else (`expectRepaired`).
    Repaired,
    /// Nothing to put back: already as kept (someone put it back, or the injection never
    /// landed).
    AlreadyBack,
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
    /// Objects the drill disturbs besides its target (the catalog's `affects`).
    pub affects: Vec<Target>,
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
            End::AlreadyBack => "already as kept".into(),
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

/// Drifts that fired in the drill namespaces without an injection: begun during the run, not
/// one a drill saw, and not explained by a drill open when it began (`since`, the sink's time;
/// a drill is open from its injection to its end, in the runner's time from `started`, widened
/// by `slack` for the two clocks): a drift on the drill's target, on an object of the Knative
/// Service it drilled (its Route, Revisions, their Deployments), or on an object it says it
/// `affects` (a Trigger whose subscriber it deleted). Anything else, however close in time, is
/// a false alert.
pub(crate) fn false_alerts(
    fired: &[Seen],
    outcomes: &[Outcome],
    started: drift_model::Millis,
    slack: Duration,
) -> Vec<Seen> {
    use drift_model::time::millis;
    let at = |offset: Duration| started + millis(offset);
    let slack = millis(slack);
    let group = |api_version: &str| {
        api_version
            .rsplit_once('/')
            .map_or(String::new(), |(group, _)| group.to_string())
    };
    let on = |target: &Target, drift: &Seen| {
        drift.namespace == target.namespace
            && drift.kind == target.kind
            && drift.name == target.name
            && group(&drift.api_version) == group(&target.api_version)
    };
    fired
        .iter()
        .filter(|drift| drift.fired_at.is_some())
        .filter(|drift| {
            let seen = outcomes
                .iter()
                .any(|outcome| outcome.drift.as_ref().is_some_and(|own| own.id == drift.id));
            let since = drift_model::time::parse_time(&drift.since);
            let explained = outcomes.iter().any(|outcome| {
                let Some(injected) = outcome.injected_at else {
                    return false;
                };
                let target = &outcome.target;
                let related = on(target, drift)
                    || (target.kind == "Service"
                        && target.api_version.starts_with("serving.knative.dev/")
                        && drift.namespace == target.namespace
                        && drift.service.as_deref() == Some(target.name.as_str()))
                    || outcome.affects.iter().any(|other| on(other, drift));
                related
                    && since.is_some_and(|since| {
                        since >= at(injected) - slack && since <= at(outcome.ended_at) + slack
                    })
            });
            // A drift that began before the run is not the run's (the kit's own, a team's).
            let before_run = since.is_some_and(|since| since < started);
            !seen && !explained && !before_run
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
    /// The false alerts, or why they could not be looked up.
    pub false_alerts: Result<&'a [Seen], String>,
    /// Arrivals a chaos run did not get to (stopped by a signal, or their object was still
    /// busy when the duration ended).
    pub not_run: usize,
    /// Whether a signal stopped the run.
    pub interrupted: bool,
}

impl Report<'_> {
    /// Whether the run passed: every drill, and in chaos no false alert (looked up).
    pub(crate) fn passed(&self) -> bool {
        self.outcomes.iter().all(Outcome::passed)
            && !self.interrupted
            && (self.mode != "chaos"
                || self
                    .false_alerts
                    .as_ref()
                    .is_ok_and(|alerts| alerts.is_empty()))
    }

    fn alerts(&self) -> &[Seen] {
        self.false_alerts.as_ref().map_or(&[], |alerts| alerts)
    }

    fn alerts_count(&self) -> String {
        match &self.false_alerts {
            Ok(alerts) => alerts.len().to_string(),
            Err(_) => "unknown".to_string(),
        }
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
    if let Err(why) = &report.false_alerts {
        out.push_str(&format!(
            "false alerts could not be looked up: {}\n",
            one_line(why)
        ));
    }
    for drift in report.alerts() {
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
        report.alerts_count(),
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
                    End::AlreadyBack => "alreadyAsKept",
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
        .alerts()
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
        // `null` when they could not be looked up (`falseAlertsError` says why).
        "summary": {"classes": classes,
                    "falseAlerts": if report.false_alerts.is_ok() { json!(false_alerts) } else { Value::Null },
                    "falseAlertsError": report.false_alerts.as_ref().err()},
    })
}

fn junit(report: &Report<'_>) -> String {
    let failed = report
        .outcomes
        .iter()
        .filter(|outcome| !outcome.passed())
        .count();
    // Beside one case per drill run: chaos's false alerts; a stop by a signal (failed); the
    // drill runs that never started (skipped).
    let false_alert_case = report.mode == "chaos";
    let alerts_failed = false_alert_case
        && report
            .false_alerts
            .as_ref()
            .map_or(true, |alerts| !alerts.is_empty());
    let tests = report.outcomes.len()
        + usize::from(false_alert_case)
        + usize::from(report.interrupted)
        + usize::from(report.not_run > 0);
    let failures = failed + usize::from(alerts_failed) + usize::from(report.interrupted);
    let skipped = usize::from(report.not_run > 0);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"drift-sentinel drill\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\">\n"
    ));
    out.push_str(&format!(
        "  <testsuite name=\"drift-sentinel drill\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"0\">\n"
    ));
    for outcome in report.outcomes {
        let time = outcome
            .ended_at
            .saturating_sub(outcome.injected_at.unwrap_or(outcome.ended_at));
        out.push_str(&format!(
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\">\n",
            xml_escape(&outcome.expectation()),
            xml_escape(&name_of(outcome, report.mode)),
            time.as_secs_f64()
        ));
        if !outcome.passed() {
            out.push_str(&format!(
                "      <failure type=\"drill\" message=\"{}\">{}</failure>\n",
                xml_escape(&one_line(&outcome.failures.join("; "))),
                xml_escape(&outcome.failures.join("\n")),
            ));
        }
        out.push_str(&format!(
            "      <system-out>{} on {}: detected {}, {}</system-out>\n    </testcase>\n",
            xml_escape(&outcome.expectation()),
            xml_escape(&outcome.object()),
            seconds(outcome.detected_after),
            xml_escape(&outcome.end_text())
        ));
    }
    if false_alert_case {
        out.push_str("    <testcase classname=\"chaos\" name=\"no false alerts\" time=\"0\"");
        match &report.false_alerts {
            Ok([]) => out.push_str("/>\n"),
            Ok(alerts) => {
                let lines: Vec<String> = alerts
                    .iter()
                    .map(|drift| {
                        format!(
                            "{} {} on {} {}/{} (drift {})",
                            drift.severity, drift.class, drift.kind, drift.namespace, drift.name, drift.id
                        )
                    })
                    .collect();
                out.push_str(&format!(
                    ">\n      <failure type=\"false_alert\" message=\"{} drift(s) fired without an injection\">{}</failure>\n    </testcase>\n",
                    lines.len(),
                    xml_escape(&lines.join("\n"))
                ));
            }
            Err(why) => out.push_str(&format!(
                ">\n      <failure type=\"false_alert\" message=\"false alerts could not be looked up\">{}</failure>\n    </testcase>\n",
                xml_escape(why)
            )),
        }
    }
    if report.interrupted {
        out.push_str("    <testcase classname=\"run\" name=\"not stopped\" time=\"0\">\n      <failure type=\"signal\" message=\"stopped by a signal\"/>\n    </testcase>\n");
    }
    if report.not_run > 0 {
        out.push_str(&format!(
            "    <testcase classname=\"run\" name=\"{} drill run(s) not started\" time=\"0\">\n      <skipped message=\"stopped by a signal, or their object was busy when the duration ended\"/>\n    </testcase>\n",
            report.not_run
        ));
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

#[cfg(test)]
mod tests;
