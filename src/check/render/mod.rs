//! Output: a [`Report`] rendered as text, Markdown, JSON or JUnit XML, one file per format, and
//! the helpers they share. Every renderer is pure and deterministic (it reads only the report,
//! whose order is stable) and writes nothing itself: the caller prints the returned string.

use serde_json::Value;

use crate::check::Report;
use drift_model::Severity;

mod json;
mod junit;
mod markdown;
mod text;

pub use text::render_text;
// Drill reports escape the same way (`commands::drill::report`).
pub(crate) use junit::xml_escape;
pub(crate) use markdown::md_text;

/// Output formats (of `check`, and of the drill report: `commands::drill::report`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One line per finding (with indented diff and fix lines), then a summary line.
    Text,
    /// A Markdown table for a pull-request comment.
    Markdown,
    /// The documented JSON structure.
    Json,
    /// JUnit XML: one test case per object, a failure per finding at or above `fail_on`; and
    /// one test case per team invariant.
    Junit,
}

/// Renders a report.
pub fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Text => render_text(report),
        Format::Markdown => markdown::render_markdown(report),
        Format::Json => {
            let mut text = serde_json::to_string_pretty(&json::render_json(report))
                .unwrap_or_else(|error| format!("{{\"error\": \"{error}\"}}"));
            text.push('\n');
            text
        }
        Format::Junit => junit::render_junit(report),
    }
}

/// A diff value as people read it: its JSON text, or `(absent)`.
fn value_text(value: &Option<Value>) -> String {
    match value {
        None => "(absent)".to_string(),
        Some(value) => value.to_string(),
    }
}

/// What the reader should know about Knative's defaults, as `(ConfigMap, note)`: a ConfigMap
/// some difference relied on that the snapshot lacks (so built-in defaults were used), and
/// values that could not be read.
fn defaults_notes(report: &Report) -> Vec<(String, String)> {
    let mut notes = Vec::new();
    for source in &report.defaults {
        let used = report.findings().any(|(_, finding)| {
            finding.diff.iter().any(|entry| {
                entry
                    .desired_from
                    .as_deref()
                    .is_some_and(|from| from.contains(source.config_map.as_str()))
            })
        });
        if used && !source.found {
            notes.push((
                source.config_map.clone(),
                "not in the live snapshot, so Knative's built-in defaults were used; list it with the snapshot (`kubectl get configmaps -A`) if the cluster changes them".to_string(),
            ));
        }
        for note in &source.notes {
            notes.push((source.config_map.clone(), note.clone()));
        }
    }
    notes
}

/// The desired value of a change, with where it came from when the manifest leaves it out.
fn desired_text(change: &crate::check::DiffEntry) -> String {
    let value = value_text(&change.desired);
    match &change.desired_from {
        Some(from) => format!("{value} ({from})"),
        None => value,
    }
}

/// One diff entry in words, each value passed through `quote`: `path: desired X, live Y`, or
/// for a comparison of clusters (`compare`) every cluster's value, `path: staging X, prod Y`
/// (the path of an object missing from some clusters is the whole object, `(object)`).
fn change_line(change: &crate::check::DiffEntry, quote: &dyn Fn(&str) -> String) -> String {
    let path = if change.path.is_empty() {
        "(object)".to_string()
    } else {
        quote(&change.path)
    };
    if change.clusters.is_empty() {
        return format!(
            "{path}: desired {}, live {}",
            quote(&desired_text(change)),
            quote(&value_text(&change.live))
        );
    }
    let values: Vec<String> = change
        .clusters
        .iter()
        // A cluster name is anyone's text, like a value: quoted the same way.
        .map(|(cluster, value)| format!("{} {}", quote(cluster), quote(&value_text(value))))
        .collect();
    format!("{path}: {}", values.join(", "))
}

/// The summary line of text and Markdown: PASS or FAIL, and the counts by severity.
fn summary_line(report: &Report) -> String {
    let objects = report.objects.len();
    let total = report.findings().count();
    let counts = format!(
        "{} critical, {} warning, {} info",
        report.count(Severity::Critical),
        report.count(Severity::Warning),
        report.count(Severity::Info)
    );
    let plural =
        |count: usize, word: &str| format!("{count} {word}{}", if count == 1 { "" } else { "s" });
    let objects = plural(objects, "object");
    if total == 0 {
        return format!(
            "PASS: no findings in {objects} (fail-on {})",
            report.fail_on.as_str()
        );
    }
    format!(
        "{}: {} of {} at or above {} in {objects} ({counts})",
        if report.failed() { "FAIL" } else { "PASS" },
        report.failing(),
        plural(total, "finding"),
        report.fail_on.as_str()
    )
}

/// One team invariant's outcome in words: `broken on 2 of 5 objects (warning)`.
fn rule_line(rule: &crate::check::RuleOutcome) -> String {
    let mut line = if rule.transition {
        "names oldObject: judged on updates only, not on a snapshot".to_string()
    } else if rule.selected == 0 {
        "selects no object".to_string()
    } else if rule.broken == 0 {
        format!(
            "held on all {} object{} it selects",
            rule.selected,
            if rule.selected == 1 { "" } else { "s" }
        )
    } else {
        format!(
            "broken on {} of {} objects ({})",
            rule.broken,
            rule.selected,
            rule.severity.as_str()
        )
    };
    if !rule.errors.is_empty() {
        line.push_str(&format!(
            "; could not be evaluated on {}",
            rule.errors.len()
        ));
    }
    line
}

/// Line breaks become spaces, so a message or hint cannot break a one-line layout.
pub(crate) fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}
